package testkit

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogsReadBack(t *testing.T) {
	tests := []struct {
		name   string
		logger func(l *Logs) *slog.Logger
	}{
		{"json", func(l *Logs) *slog.Logger { return l.JSONLogger(slog.LevelInfo) }},
		{"text", func(l *Logs) *slog.Logger { return l.TextLogger(slog.LevelInfo) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Logs
			log := tt.logger(&l)
			log.Debug("below the level")
			log.Info("started", "addr", "127.0.0.1:1")
			log.Warn("request refused: too big", "limit", 10, "why", `a "quoted" value`)
			log.Warn("request refused: too slow")
			log.Error("gone", slog.Group("g", "k", "v"))

			assert.Len(t, l.Lines(), 4)
			assert.True(t, l.Contains("too big"))
			assert.False(t, l.Contains("below the level"))
			assert.Equal(t, 2, l.Count(slog.LevelWarn, "request refused"))
			assert.Equal(t, 1, l.Count(slog.LevelInfo, ""))
			assert.Zero(t, l.Count(slog.LevelError, "refused"))
			recs := l.Records()
			require.Len(t, recs, 4)
			assert.Equal(t, Record{Level: "WARN", Msg: "request refused: too big", Attrs: map[string]string{"limit": "10", "why": `a "quoted" value`}, Line: recs[1].Line}, recs[1])
			assert.Equal(t, "127.0.0.1:1", recs[0].Attrs["addr"])
			line, ok := l.Line("started")
			assert.True(t, ok)
			assert.Equal(t, recs[0].Line, line)
		})
	}
}

func TestParseRecord(t *testing.T) {
	tests := []struct {
		line string
		want Record
		ok   bool
	}{
		{`{"time":"x","level":"INFO","msg":"m","n":1}`, Record{Level: "INFO", Msg: "m", Attrs: map[string]string{"n": "1"}}, true},
		{`time=x level=DEBUG msg="a b" k=v`, Record{Level: "DEBUG", Msg: "a b", Attrs: map[string]string{"k": "v"}}, true},
		{`level=INFO msg=plain`, Record{Level: "INFO", Msg: "plain", Attrs: map[string]string{}}, true},
		{`gateway listening on 127.0.0.1:8088`, Record{}, false},
		{`{"msg":"no level"}`, Record{}, false},
		{`{broken`, Record{}, false},
		{`level=INFO msg="unterminated`, Record{}, false},
		{``, Record{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, ok := ParseRecord(tt.line)
			require.Equal(t, tt.ok, ok)
			if ok {
				tt.want.Line = tt.line
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestLinesLeaveOutAnUnendedLine(t *testing.T) {
	var l Logs
	_, _ = l.Write([]byte("one\ntw"))
	assert.Equal(t, []string{"one"}, l.Lines())
	_, _ = l.Write([]byte("o\n"))
	assert.Equal(t, []string{"one", "two"}, l.Lines())
	assert.Equal(t, "one\ntwo\n", l.String())
}

func TestLogsWait(t *testing.T) {
	tests := []struct {
		name    string
		write   string // written by another goroutine once the wait began
		cond    func(l *Logs) bool
		timeout time.Duration
		wantErr bool
	}{
		{"already true", "", func(*Logs) bool { return true }, time.Hour, false},
		{"woken by a write", "ready\n", func(l *Logs) bool { return l.Contains("ready") }, time.Hour, false},
		{"deadline", "", func(l *Logs) bool { return l.Contains("never") }, 20 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Logs
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			var wg sync.WaitGroup
			defer wg.Wait()
			if tt.write != "" {
				wg.Go(func() { _, _ = l.Write([]byte(tt.write)) })
			}
			err := l.Wait(ctx, func() bool { return tt.cond(&l) })
			if tt.wantErr {
				require.ErrorIs(t, err, context.DeadlineExceeded)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

func TestWaitContainsReturnsTheLine(t *testing.T) {
	log, l := NewLogger(slog.LevelDebug)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { log.Debug("gateway listening", "addr", "127.0.0.1:9") })
	line := l.WaitContains(t, "gateway listening")
	rec, ok := ParseRecord(line)
	require.True(t, ok)
	assert.Equal(t, "127.0.0.1:9", rec.Attrs["addr"])
}

func TestWatch(t *testing.T) {
	tests := []struct {
		name   string
		before string // written before Watch
		after  []string
		want   string // "" for nothing received
	}{
		{"written before", "a\ngateway listening on 127.0.0.1:1\n", nil, "gateway listening on 127.0.0.1:1"},
		{"written after", "a\n", []string{"b\nlistening on x\n"}, "listening on x"},
		{"line ended later", "", []string{"listening on ", "127.0.0.1:2", "\nmore\n"}, "listening on 127.0.0.1:2"},
		{"never", "a\n", []string{"b\n"}, ""},
		{"first of two", "", []string{"listening on 1\nlistening on 2\n"}, "listening on 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Logs
			_, _ = l.Write([]byte(tt.before))
			ch := l.Watch("listening on ")
			for _, s := range tt.after {
				_, _ = l.Write([]byte(s))
			}
			select {
			case got := <-ch:
				assert.Equal(t, tt.want, got)
			default:
				assert.Empty(t, tt.want, "nothing was received")
			}
			select {
			case got := <-ch:
				t.Fatalf("a second line was received: %q", got)
			default:
			}
		})
	}
}

func TestLogsAreSafeForConcurrentUse(t *testing.T) {
	log, l := NewLogger(slog.LevelInfo)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				log.Info("tick")
				l.Lines()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 200, l.Count(slog.LevelInfo, "tick"))
}
