package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/events"
)

// DefaultMaxLine is the default of --max-line-bytes: NATS's default
// maximum payload, which no publishable event exceeds.
const defaultMaxLine = 1 << 20

// ingestFlags are the flags of publisher ingest.
type ingestFlags struct {
	nats    natsFlags
	maxLine int
	json    bool
	input   string // a path, or "-" for stdin
	labels  cli.Labels
}

func parseIngest(args []string, stderr io.Writer) (*ingestFlags, error) {
	f := &ingestFlags{}
	fs := flag.NewFlagSet("publisher ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: publisher ingest [flags] [FILE|-]\n\nPublishes attempt events, one JSON object per line, from FILE or stdin (-, the default).\nInvalid lines are reported on stderr with their line number and skipped.\nEach event's labels (its \"labels\" member) go with it; --labels adds defaults under them.\n\nFlags:")
		fs.PrintDefaults()
	}
	f.nats.register(fs)
	fs.IntVar(&f.maxLine, "max-line-bytes", defaultMaxLine, "longest line accepted; a longer one is reported as invalid")
	fs.BoolVar(&f.json, "json", false, "print the summary as JSON")
	fs.Var(&f.labels, "labels", "labels added to every event, under the event's own (a key the event sets wins): "+cli.LabelsUsage+
		". They become part of the events published: ingest a file again with the same --labels, so that an event ID keeps one body")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 0:
		f.input = "-"
	case 1:
		f.input = fs.Arg(0)
	default:
		return nil, cli.Usagef("ingest takes at most one FILE, got %q", fs.Args())
	}
	if err := f.nats.validate(); err != nil {
		return nil, err
	}
	if f.maxLine < 1 {
		return nil, cli.Usagef("--max-line-bytes: %d must be at least 1", f.maxLine)
	}
	return f, nil
}

// ingestSummary is the summary of publisher ingest; with --json it is
// printed as it is.
type ingestSummary struct {
	Input       string        `json:"input"`
	Lines       int64         `json:"lines"`
	Blank       int64         `json:"blank"`
	Valid       int64         `json:"valid"`
	Invalid     int64         `json:"invalid"`
	Refused     int64         `json:"refused"` // valid events the publisher refused
	Interrupted bool          `json:"interrupted"`
	Events      eventsSummary `json:"events"`
	Errors      []string      `json:"errors,omitempty"`
}

func runIngest(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	f, err := parseIngest(args, stderr)
	if err != nil {
		return err
	}
	in := stdin
	if f.input != "-" {
		file, err := os.Open(f.input)
		if err != nil {
			return cli.Usagef("%v", err)
		}
		defer file.Close()
		in = file
	}
	logger := newLogger(stderr, f.nats)
	conn, err := connect(ctx, f.nats, logger)
	if err != nil {
		return err
	}
	ctx = conn.ctx
	defer func() { err = conn.explain(err) }()

	sum := ingestSummary{Input: f.input}
	readErr := ingestLines(ctx, in, f.maxLine, f.labels.L, &sum, func(n int64, ev *events.Attempt) {
		if err := conn.pub.Publish(ctx, ev); err != nil {
			sum.Refused++
			fmt.Fprintf(stderr, "line %d: not published: %v\n", n, err)
		}
	}, func(n int64, reason, detail string) {
		fmt.Fprintf(stderr, "line %d: %s: %s\n", n, reason, detail)
	})
	stats, closeErr := conn.close(ctx, logger)
	sum.Events = eventsOf(stats)
	sum.Interrupted = ctx.Err() != nil
	if readErr != nil && !sum.Interrupted {
		sum.Errors = append(sum.Errors, fmt.Sprintf("reading %s: %v", f.input, readErr))
	}
	if closeErr != nil {
		sum.Errors = append(sum.Errors, closeErr.Error())
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "lines %d: %d valid, %d invalid, %d blank\n", sum.Lines, sum.Valid, sum.Invalid, sum.Blank)
		fmt.Fprintf(stdout, "events %d enqueued, %d acked (%d duplicates), %d undelivered, %d refused\n",
			sum.Events.Enqueued, sum.Events.Acked, sum.Events.Duplicates, sum.Events.Undelivered, sum.Refused)
		if sum.Events.Recovered > 0 || sum.Events.Kept > 0 {
			fmt.Fprintf(stdout, "outbox: %d recovered from an earlier run, %d kept for the next one\n", sum.Events.Recovered, sum.Events.Kept)
		}
		if sum.Interrupted {
			fmt.Fprintln(stdout, "interrupted before the end of the input")
		}
		for _, e := range sum.Errors {
			fmt.Fprintf(stdout, "error: %s\n", e)
		}
	}

	switch {
	case stats.Undelivered > 0 || closeErr != nil:
		return cli.Failed(fmt.Errorf("%d event(s) undelivered: %v", stats.Undelivered, closeErr))
	case sum.Invalid > 0 || sum.Refused > 0:
		return cli.Failed(fmt.Errorf("%d invalid line(s), %d refused event(s)", sum.Invalid, sum.Refused))
	case len(sum.Errors) > 0:
		return cli.Failed(errors.New(sum.Errors[0]))
	case sum.Interrupted:
		return errInterrupted
	}
	return nil
}

// ingestLines reads r line by line until EOF or ctx ends, counting into
// sum: a blank line is skipped, a valid event (with labels, the --labels
// defaults, under its own) goes to publish, an invalid one to reject with
// its reason and detail (for labels, invalid_field naming the label and
// the rule). Lines are numbered from 1. It returns the read error, if any
// (io.EOF excepted).
func ingestLines(ctx context.Context, r io.Reader, maxLine int, labels api.Labels, sum *ingestSummary,
	publish func(n int64, ev *events.Attempt), reject func(n int64, reason, detail string)) error {
	lr := &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: maxLine}
	for ctx.Err() == nil {
		line, size, err := lr.next()
		if err == io.EOF && size == 0 {
			return nil
		}
		if err != nil && err != io.EOF {
			return err
		}
		sum.Lines++
		n := sum.Lines
		switch {
		case size > maxLine:
			sum.Invalid++
			reject(n, "too_long", fmt.Sprintf("the line is %d bytes; the limit is %d (--max-line-bytes)", size, maxLine))
		case len(bytes.TrimSpace(line)) == 0:
			sum.Blank++
		default:
			ev, derr := events.Decode(line)
			if derr != nil {
				sum.Invalid++
				var re *events.RejectError
				if errors.As(derr, &re) {
					reject(n, string(re.Reason), re.Detail)
				} else {
					reject(n, "invalid", derr.Error())
				}
				break
			}
			if len(labels) != 0 {
				ev.Labels = labels.Merge(ev.Labels)
				if err := events.ValidateLabels(ev.Labels); err != nil {
					sum.Invalid++
					reject(n, string(events.ReasonInvalidField), err.Error()+" (the event's labels with --labels)")
					break
				}
			}
			sum.Valid++
			publish(n, ev)
		}
		if err == io.EOF {
			return nil
		}
	}
	return ctx.Err()
}

// lineReader reads lines of any length, keeping at most max bytes of each.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// next returns the next line without its line ending ("\n" or "\r\n"),
// the line's full size in bytes without the ending (when it exceeds max,
// line holds only a prefix), and io.EOF with a last line that has no
// newline.
func (l *lineReader) next() (line []byte, size int, err error) {
	l.buf = l.buf[:0]
	var prevLast byte // last byte of the previous fragment
	for {
		frag, err := l.r.ReadSlice('\n')
		size += len(frag)
		// Keep up to max bytes and a "\r\n"; the rest is only counted.
		if keep := l.max + 2 - len(l.buf); keep > 0 {
			l.buf = append(l.buf, frag[:min(len(frag), keep)]...)
		}
		if err == bufio.ErrBufferFull {
			if len(frag) > 0 {
				prevLast = frag[len(frag)-1]
			}
			continue
		}
		if err == nil { // the line ends with '\n'
			size--
			before := prevLast
			if len(frag) >= 2 {
				before = frag[len(frag)-2]
			}
			if before == '\r' && size > 0 {
				size--
			}
		}
		return l.buf[:min(len(l.buf), size, l.max)], size, err
	}
}
