package progress

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// Meter reports the progress of one piece of work that counts units
// (events, records) towards a total that may grow while it runs. It is safe
// for concurrent use. Updates are cheap: the meter writes at most once per
// interval, so callers may update it for every unit.
type Meter struct {
	mu       sync.Mutex
	w        io.Writer
	label    string
	unit     string
	tty      bool
	interval time.Duration
	now      func() time.Time

	start     time.Time
	lastWrite time.Time
	done      uint64
	total     uint64
	drawn     bool // a terminal line is on screen and not yet ended
}

// Options configure a Meter. The zero value detects a terminal on w.
type Options struct {
	// Unit names what is counted. Default "events".
	Unit string
	// Terminal forces the terminal (true) or plain-line (false) style;
	// nil detects it from w.
	Terminal *bool
	// Interval between writes. Default 100ms on a terminal, 2s otherwise.
	Interval time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// New returns a meter that writes to w (usually stderr) lines starting
// with label.
func New(w io.Writer, label string, o Options) *Meter {
	m := &Meter{w: w, label: label, unit: o.Unit, now: o.Now, interval: o.Interval}
	if m.unit == "" {
		m.unit = "events"
	}
	if m.now == nil {
		m.now = time.Now
	}
	if o.Terminal != nil {
		m.tty = *o.Terminal
	} else {
		m.tty = IsTerminal(w)
	}
	if m.interval == 0 {
		m.interval = 2 * time.Second
		if m.tty {
			m.interval = 100 * time.Millisecond
		}
	}
	m.start = m.now()
	return m
}

// IsTerminal reports whether w is a character device such as a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Update records that done of total units are finished (total 0: unknown)
// and writes a line when the interval has passed since the last one.
func (m *Meter) Update(done, total uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done, m.total = done, total
	now := m.now()
	if !m.lastWrite.IsZero() && now.Sub(m.lastWrite) < m.interval {
		return
	}
	if m.lastWrite.IsZero() && now.Sub(m.start) < m.interval {
		return // short work stays quiet
	}
	m.write(now)
}

// Finish writes the final line, when the work lasted long enough for a
// progress line to be written, and ends the terminal line.
func (m *Meter) Finish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastWrite.IsZero() {
		return // short work stays quiet
	}
	m.write(m.now())
	if m.tty && m.drawn {
		fmt.Fprintln(m.w)
		m.drawn = false
	}
}

// Clear ends a terminal line in progress without a final line, so that
// other output can follow on a fresh line.
func (m *Meter) Clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tty && m.drawn {
		fmt.Fprint(m.w, "\r\x1b[K")
		m.drawn = false
	}
}

func (m *Meter) write(now time.Time) {
	m.lastWrite = now
	line := Line(m.label, m.unit, m.done, m.total, now.Sub(m.start))
	if m.tty {
		fmt.Fprint(m.w, "\r\x1b[K"+line)
		m.drawn = true
		return
	}
	fmt.Fprintln(m.w, line)
}

// Line formats one progress line: what is done of the total, the rate
// over elapsed, and the time left at that rate when the total is known.
func Line(label, unit string, done, total uint64, elapsed time.Duration) string {
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	s := label + ": " + Count(done)
	if total > 0 {
		s += " of " + Count(total)
	}
	s += " " + unit + ", " + Count(uint64(rate+0.5)) + " " + unit + "/s"
	switch {
	case total > 0 && done >= total:
		s += ", done in " + round(elapsed).String()
	case total > 0 && rate > 0:
		left := time.Duration(float64(total-done) / rate * float64(time.Second))
		s += ", about " + round(left).String() + " left"
	}
	return s
}

func round(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// Count writes n with thousands separators.
func Count(n uint64) string {
	s := strconv.FormatUint(n, 10)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
