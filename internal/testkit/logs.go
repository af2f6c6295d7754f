package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitTimeout is how long the Wait helpers of the kit wait for a condition
// before they fail the test: generous, so that a loaded machine under
// -race does not fail a test that would pass.
const WaitTimeout = 30 * time.Second

// pollEvery is how often a Wait looks again at a condition that no write
// has woken it for (a condition may also read state outside the logs).
const pollEvery = 5 * time.Millisecond

// Logs is a log buffer: an io.Writer safe for concurrent use, for a slog
// handler (NewLogger) or a command's output, that reads back as text or as
// records and wakes its waiters on every write. The zero value is ready to
// use.
type Logs struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	changed  chan struct{} // closed and replaced on every write
	watchers []watcher     // Watch: not yet answered
}

// watcher is a Watch waiting for a line that contains s.
type watcher struct {
	s  string
	ch chan string
}

// NewLogger returns a JSON logger at level and the Logs it writes into.
func NewLogger(level slog.Leveler) (*slog.Logger, *Logs) {
	l := &Logs{}
	return l.JSONLogger(level), l
}

// JSONLogger returns a logger at level writing JSON lines into l.
func (l *Logs) JSONLogger(level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: level}))
}

// TextLogger returns a logger at level writing slog's text lines into l.
func (l *Logs) TextLogger(level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: level}))
}

// Write appends p and wakes the waiters.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.buf.Write(p)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	l.watchers = slices.DeleteFunc(l.watchers, func(w watcher) bool { return l.answerLocked(w) })
	return n, err
}

// Watch returns a channel that receives the first complete line that
// contains s, once: at once if it was written already, else when it is.
// A test selects on it together with the end of what it waits for (a
// command's exit) and a deadline.
func (l *Logs) Watch(s string) <-chan string {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := watcher{s: s, ch: make(chan string, 1)}
	if !l.answerLocked(w) {
		l.watchers = append(l.watchers, w)
	}
	return w.ch
}

// answerLocked sends w the first complete line with w.s, if there is one,
// and reports whether it did.
func (l *Logs) answerLocked(w watcher) bool {
	b := l.buf.Bytes()
	i := bytes.Index(b, []byte(w.s))
	if i < 0 {
		return false
	}
	end := bytes.IndexByte(b[i:], '\n')
	if end < 0 {
		return false // the line is not complete yet; a later write ends it
	}
	start := bytes.LastIndexByte(b[:i], '\n') + 1
	w.ch <- string(b[start : i+end])
	return true
}

// String returns everything written so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Lines returns the lines written so far, without their newlines; a last
// line not yet ended is left out.
func (l *Logs) Lines() []string {
	s := l.String()
	end := strings.LastIndexByte(s, '\n')
	if end < 0 {
		return nil
	}
	return strings.Split(s[:end], "\n")
}

// Contains reports whether s was written (within a line or across lines).
func (l *Logs) Contains(s string) bool { return strings.Contains(l.String(), s) }

// Line returns the first line that contains s.
func (l *Logs) Line(s string) (string, bool) {
	for _, line := range l.Lines() {
		if strings.Contains(line, s) {
			return line, true
		}
	}
	return "", false
}

// Record is one line read back: its level and message, and its other
// attributes as text (groups are flattened with dots in the text format,
// and kept as JSON in the JSON format).
type Record struct {
	Level string
	Msg   string
	Attrs map[string]string
	Line  string
}

// Records returns the lines that parse as slog's JSON or text output, in
// order; other lines are left out.
func (l *Logs) Records() []Record {
	var out []Record
	for _, line := range l.Lines() {
		if r, ok := ParseRecord(line); ok {
			out = append(out, r)
		}
	}
	return out
}

// Count returns how many records are at level and have a message that
// contains msg ("" counts every record at level).
func (l *Logs) Count(level slog.Level, msg string) int {
	n := 0
	for _, r := range l.Records() {
		if r.Level == level.String() && strings.Contains(r.Msg, msg) {
			n++
		}
	}
	return n
}

// Wait returns nil once cond holds, or the context's cause when ctx ends
// first. It looks at cond after every write and every few milliseconds.
func (l *Logs) Wait(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		l.mu.Lock()
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// WaitFor waits up to WaitTimeout until cond holds, and fails the test,
// naming what it waited for and showing the logs, if it does not.
func (l *Logs) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	if err := l.Wait(ctx, cond); err != nil {
		t.Fatalf("waiting until %s: %v; logs:\n%s", what, err, l.String())
	}
}

// WaitContains waits until s is written, and returns the first line that
// contains it.
func (l *Logs) WaitContains(t testing.TB, s string) string {
	t.Helper()
	var line string
	l.WaitFor(t, fmt.Sprintf("the logs contain %q", s), func() bool {
		var ok bool
		line, ok = l.Line(s)
		return ok
	})
	return line
}

// ParseRecord reads one line of slog's JSON or text output.
func ParseRecord(line string) (Record, bool) {
	var attrs map[string]string
	if strings.HasPrefix(line, "{") {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &m) != nil {
			return Record{}, false
		}
		attrs = make(map[string]string, len(m))
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				attrs[k] = s
			} else {
				attrs[k] = string(v)
			}
		}
	} else {
		var ok bool
		if attrs, ok = parseText(line); !ok {
			return Record{}, false
		}
	}
	level, okLevel := attrs[slog.LevelKey]
	msg, okMsg := attrs[slog.MessageKey]
	if !okLevel || !okMsg {
		return Record{}, false
	}
	delete(attrs, slog.LevelKey)
	delete(attrs, slog.MessageKey)
	delete(attrs, slog.TimeKey)
	return Record{Level: level, Msg: msg, Attrs: attrs, Line: line}, true
}

// parseText reads the key=value pairs of slog's text format, whose values
// are bare or quoted as Go strings.
func parseText(line string) (map[string]string, bool) {
	attrs := map[string]string{}
	for s := strings.TrimSpace(line); s != ""; s = strings.TrimLeft(s, " ") {
		key, rest, ok := strings.Cut(s, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return nil, false
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, false
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			val, rest, _ = strings.Cut(rest, " ")
			rest = " " + rest
		}
		attrs[key] = val
		s = rest
	}
	return attrs, true
}
