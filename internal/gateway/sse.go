package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// sseEvent is one event of a server-sent event stream: its bytes as
// received (forwarded verbatim), its name and its data (the data lines
// joined with "\n").
type sseEvent struct {
	raw  []byte
	name string
	data []byte
}

// sseReader reads the events of a stream one at a time. The event it
// returns is valid until the next call.
type sseReader struct {
	r    *bufio.Reader
	max  int // the largest event, in bytes
	raw  []byte
	data []byte
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10), max: max}
}

// errEventTooLarge ends a stream whose event is over the limit.
var errEventTooLarge = errors.New("an event of the upstream's stream is larger than the gateway takes")

// next returns the next event. At the end of the stream it returns
// io.EOF; a stream that ends inside a line returns io.ErrUnexpectedEOF.
// Blank lines between events are skipped.
func (s *sseReader) next() (*sseEvent, error) {
	s.raw, s.data = s.raw[:0], s.data[:0]
	var ev sseEvent
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			if errors.Is(err, io.EOF) && len(bytes.TrimSpace(s.raw)) > 0 {
				// The stream ended after whole lines of an event, without
				// the blank line: the event counts, and the end comes
				// next.
				ev.raw, ev.data = s.raw, s.data
				return &ev, nil
			}
			return nil, err
		}
		s.raw = append(s.raw, line...)
		content := bytes.TrimRight(line, "\r\n")
		if len(content) == 0 {
			if len(bytes.TrimSpace(s.raw)) == 0 {
				s.raw = s.raw[:0] // a blank line between events
				continue
			}
			ev.raw, ev.data = s.raw, s.data
			return &ev, nil
		}
		field, value, _ := bytes.Cut(content, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.name = string(value)
		case "data":
			if hasData {
				s.data = append(s.data, '\n')
			}
			s.data, hasData = append(s.data, value...), true
		}
	}
}

// line reads one line, its end included, within the event size limit.
func (s *sseReader) line() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if err == nil || (errors.Is(err, io.EOF) && len(line) == 0) {
		return line, s.fits(len(line), err)
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF // a last line without its end
		}
		return nil, err
	}
	long := append([]byte(nil), line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if err := s.fits(len(long), nil); err != nil {
			return nil, err
		}
		line, err = s.r.ReadSlice('\n')
		long = append(long, line...)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return long, s.fits(len(long), nil)
}

// fits returns err, or errEventTooLarge when n more bytes make the event
// too large.
func (s *sseReader) fits(n int, err error) error {
	if len(s.raw)+n > s.max {
		return fmt.Errorf("%w (%d bytes)", errEventTooLarge, s.max)
	}
	return err
}
