package monitor

import (
	"context"
	"log/slog"
	"time"
)

// This file is temporary: it derives the Observer's calls from what
// projection.Aggregator exports today, until projection calls an
// Observer itself (projection.Config.Observer, called after each
// checkpoint write and each recorded rejection). Then LogHandler and
// BatchSampler go away.

// LogHandler wraps the aggregator's log handler and tells obs of every
// "aggregator: rejected event" record, with its reason attribute: the
// aggregator logs each rejection once, when it is recorded.
type LogHandler struct {
	slog.Handler
	Obs Observer
}

// rejectedMessage is the message of the aggregator's record of a
// rejection (internal/projection/batch.go).
const rejectedMessage = "aggregator: rejected event"

// Enabled reports true for warnings, which the rejections are, whatever
// the wrapped handler's level.
func (h LogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l == slog.LevelWarn || h.Handler.Enabled(ctx, l)
}

// Handle observes a rejection, then passes the record on if the wrapped
// handler wants it.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == rejectedMessage {
		reason := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "reason" {
				reason = a.Value.String()
				return false
			}
			return true
		})
		h.Obs.Rejected(reason)
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper around the derived handler.
func (h LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return LogHandler{Handler: h.Handler.WithAttrs(as), Obs: h.Obs}
}

// WithGroup keeps the wrapper around the derived handler.
func (h LogHandler) WithGroup(name string) slog.Handler {
	return LogHandler{Handler: h.Handler.WithGroup(name), Obs: h.Obs}
}

// BatchSampler estimates batch durations from the aggregator's batch
// counter, polled every Interval: when batches commit back to back (the
// previous poll saw one commit too), the time since the previous commit,
// divided among the batches committed since, is a batch's duration in
// the pipeline. After a quiet spell the first commit is not observed, as
// the wait for events is not a batch's work. It is an approximation at
// the poll's resolution, for the time until projection reports batches
// itself.
type BatchSampler struct {
	Src      Source
	Obs      Observer
	Interval time.Duration
	Now      func() time.Time
}

// Run polls until ctx ends.
func (b BatchSampler) Run(ctx context.Context) {
	t := time.NewTicker(b.Interval)
	defer t.Stop()
	last := b.Src.Stats()
	lastAt, busy := b.Now(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, now := b.Src.Stats(), b.Now()
		k := st.Batches - last.Batches
		if k == 0 {
			busy = false
			continue
		}
		if busy {
			per := now.Sub(lastAt) / time.Duration(k)
			evPer := int((st.Events - last.Events) / k)
			for range k {
				b.Obs.BatchCommitted(evPer, per)
			}
		}
		last, lastAt, busy = st, now, true
	}
}
