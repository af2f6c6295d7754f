package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/testkit"
)

func boolp(b bool) *bool { return &b }
func lines(b *bytes.Buffer) []string {
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func TestLine(t *testing.T) {
	tests := []struct {
		name        string
		done, total uint64
		elapsed     time.Duration
		want        string
	}{
		{"known total", 250_000, 1_000_000, 5 * time.Second, "verify: 250,000 of 1,000,000 events, 50,000 events/s, about 15s left"},
		{"finished", 1_000_000, 1_000_000, 20 * time.Second, "verify: 1,000,000 of 1,000,000 events, 50,000 events/s, done in 20s"},
		{"unknown total", 1234, 0, 2 * time.Second, "verify: 1,234 events, 617 events/s"},
		{"nothing yet", 0, 10, 0, "verify: 0 of 10 events, 0 events/s"},
		{"sub-10s left", 900, 1000, 9 * time.Second, "verify: 900 of 1,000 events, 100 events/s, about 1s left"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Line("verify", "events", tc.done, tc.total, tc.elapsed))
		})
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		require.Equal(t, want, Count(n))
	}
}

// Not on a terminal: one plain line per interval, quiet for short work,
// and always a final line.
func TestMeterPlainLines(t *testing.T) {
	var buf bytes.Buffer
	c := testkit.NewClock()
	m := New(&buf, "rebuild", Options{Terminal: boolp(false), Interval: 2 * time.Second, Now: c.Now})
	m.Update(10, 100)
	c.Advance(time.Second)
	m.Update(20, 100)
	require.Empty(t, buf.String(), "nothing before the first interval")
	c.Advance(time.Second)
	m.Update(40, 100)
	c.Advance(500 * time.Millisecond)
	m.Update(45, 100)
	c.Advance(2 * time.Second)
	m.Update(90, 100)
	m.Finish()
	require.Equal(t, []string{
		"rebuild: 40 of 100 events, 20 events/s, about 3s left",
		"rebuild: 90 of 100 events, 20 events/s, about 500ms left",
		"rebuild: 90 of 100 events, 20 events/s, about 500ms left",
	}, lines(&buf))
	require.NotContains(t, buf.String(), "\r")
}

// On a terminal: the line is redrawn in place and ended by Finish.
func TestMeterTerminal(t *testing.T) {
	var buf bytes.Buffer
	c := testkit.NewClock()
	m := New(&buf, "verify", Options{Terminal: boolp(true), Now: c.Now, Unit: "records"})
	c.Advance(200 * time.Millisecond)
	m.Update(1, 4)
	c.Advance(200 * time.Millisecond)
	m.Update(4, 4)
	m.Finish()
	out := buf.String()
	require.Equal(t, 3, strings.Count(out, "\r\x1b[K"), "every write redraws the line: %q", out)
	require.True(t, strings.HasSuffix(out, "verify: 4 of 4 records, 10 records/s, done in 400ms\n"), "%q", out)

	buf.Reset()
	m.Update(5, 0)
	c.Advance(time.Second)
	m.Update(6, 0)
	m.Clear()
	require.Equal(t, "\r\x1b[Kverify: 6 records, 4 records/s\r\x1b[K", buf.String())
}

// Work shorter than one interval writes nothing at all.
func TestMeterQuickWork(t *testing.T) {
	var buf bytes.Buffer
	c := testkit.NewClock()
	m := New(&buf, "report", Options{Terminal: boolp(false), Now: c.Now})
	m.Update(5, 5)
	c.Advance(time.Second)
	m.Finish()
	require.Empty(t, buf.String())
}

func TestIsTerminal(t *testing.T) {
	require.False(t, IsTerminal(&bytes.Buffer{}))
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	require.False(t, IsTerminal(f), "a regular file is not a terminal")
}
