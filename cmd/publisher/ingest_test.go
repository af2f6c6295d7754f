package main

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLineReader(t *testing.T) {
	long := strings.Repeat("a", 100)
	type line struct {
		text string
		size int
	}
	tests := []struct {
		name string
		in   string
		max  int
		want []line
	}{
		{"empty input", "", 10, nil},
		{"one line without newline", "abc", 10, []line{{"abc", 3}}},
		{"LF and CRLF", "ab\ncd\r\n\nef", 10, []line{{"ab", 2}, {"cd", 2}, {"", 0}, {"ef", 2}}},
		{"lone CR kept", "a\rb\n", 10, []line{{"a\rb", 3}}},
		{"exactly max", "abcd\r\n", 4, []line{{"abcd", 4}}},
		{"longer than max", long + "\nok\n", 10, []line{{long[:10], 100}, {"ok", 2}}},
		// The reader's buffer is 16 bytes: lines span several fragments,
		// and a CRLF can straddle two.
		{"longer than the buffer", long + "\r\n" + long + "\n", 200, []line{{long, 100}, {long, 100}}},
		{"CR at a fragment end", strings.Repeat("b", 15) + "\r\nx", 200, []line{{strings.Repeat("b", 15), 15}, {"x", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := &lineReader{r: bufio.NewReaderSize(strings.NewReader(tt.in), 16), max: tt.max}
			var got []line
			for {
				l, size, err := lr.next()
				if err == io.EOF && size == 0 {
					break
				}
				require.True(t, err == nil || err == io.EOF, "%v", err)
				got = append(got, line{string(l), size})
				if err == io.EOF {
					break
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
