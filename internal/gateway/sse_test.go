package gateway

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSSEReader(t *testing.T) {
	stream := "\n: comment\nevent: a\ndata: {\"x\":1}\n\n" + // a comment is part of the event
		"data: line1\r\ndata: line2\r\n\r\n" + // CRLF, data lines joined
		"event: b\ndata:no-space\n\n\n\n" + // blank lines between events
		"data: last\n" // ends without the blank line
	rd := newSSEReader(strings.NewReader(stream), 1<<10)
	var got []string
	for {
		ev, err := rd.next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, ev.name+"|"+string(ev.data)+"|"+string(ev.raw))
	}
	assert.Equal(t, []string{
		"a|{\"x\":1}|: comment\nevent: a\ndata: {\"x\":1}\n\n",
		"|line1\nline2|data: line1\r\ndata: line2\r\n\r\n",
		"b|no-space|event: b\ndata:no-space\n\n",
		"|last|data: last\n",
	}, got)
}

func TestSSEReaderCutLine(t *testing.T) {
	rd := newSSEReader(strings.NewReader("data: {\"par"), 1<<10)
	_, err := rd.next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestSSEReaderTooLarge(t *testing.T) {
	long := "data: " + strings.Repeat("x", 40<<10) + "\n\n" // longer than the reader's buffer
	rd := newSSEReader(strings.NewReader(long), 32<<10)
	_, err := rd.next()
	require.ErrorIs(t, err, errEventTooLarge)

	rd = newSSEReader(strings.NewReader(long+"data: b\n\n"), 64<<10)
	ev, err := rd.next()
	require.NoError(t, err)
	assert.Len(t, ev.data, 40<<10)
	ev, err = rd.next()
	require.NoError(t, err)
	assert.Equal(t, "b", string(ev.data))
	_, err = rd.next()
	require.ErrorIs(t, err, io.EOF)
}
