package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCodeAndReport(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code int
		out  string
	}{
		{"nil", nil, ExitOK, ""},
		{"help", flag.ErrHelp, ExitOK, ""},
		{"wrapped help", fmt.Errorf("x: %w", flag.ErrHelp), ExitOK, ""},
		{"usage", Usagef("--batch: %d must be positive", 0), ExitUsage, "cmd: --batch: 0 must be positive\n"},
		{"failed", Failed(errors.New("2 events undelivered")), ExitFailed, "cmd: 2 events undelivered\n"},
		{"already said", Said, ExitUsage, ""},
		{"wrapped exit error", fmt.Errorf("verify: %w", Failed(errors.New("drift"))), ExitFailed, "cmd: verify: drift\n"},
		{"plain error", errors.New("nats: no servers available"), ExitUsage, "cmd: nats: no servers available\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.code, Code(tt.err))
			var b bytes.Buffer
			assert.Equal(t, tt.code, Report("cmd", &b, tt.err))
			assert.Equal(t, tt.out, b.String())
		})
	}
}

func TestUsagefWraps(t *testing.T) {
	base := errors.New("base")
	assert.ErrorIs(t, Usagef("--x: %w", base), base)
}

func TestParse(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 0, "")
	assert.NoError(t, Parse(fs, []string{"-n", "3"}))
	assert.Equal(t, 3, *n)
	assert.ErrorIs(t, Parse(fs, []string{"-h"}), flag.ErrHelp)
	assert.Equal(t, ExitUsage, Code(Parse(fs, []string{"-bogus"})))
}
