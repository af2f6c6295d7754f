package projection

import "github.com/agentledger/ledger/internal/events"

// ChangeObserver is told, once a batch's checkpoint is written, of every
// request record the batch wrote, each as it was before the batch and as
// the batch left it. An Observer that also implements ChangeObserver gets
// one call per committed batch, on the committing goroutine, after
// BatchCommitted.
//
// The changes are those of the committed batch, never of events as
// fetched: an event delivered again (after a crash, a lost lease, a
// redelivery) finds its record already holding it and changes nothing, so
// a metric fed by the changes counts each event at most once per process.
// A batch that fails before its checkpoint is reported to nobody: its
// writes, if any reached the buckets, are found there by the next term,
// which does not report them either (a metric undercounts a failed batch,
// never double-counts it).
type ChangeObserver interface {
	RequestsCommitted(c Changes)
}

// Changes are the request records one committed batch wrote. They are
// valid only during the call: the records must not be modified or kept.
type Changes struct{ ws []*reqWork }

// Len is the number of records.
func (c Changes) Len() int { return len(c.ws) }

// At returns the i-th record's change.
func (c Changes) At(i int) Change { return Change{w: c.ws[i]} }

// Change is one request record before and after a batch.
type Change struct{ w *reqWork }

// Was is the record before the batch: nil when the ledger had none (the
// batch recorded the request's first accepted event).
func (c Change) Was() *Request { return c.w.was }

// Now is the record the batch wrote.
func (c Change) Now() *Request { return c.w.rec }

// ErrorKind returns the error kind of e, an entry of Now whose outcome is
// an error and which the batch added (records keep no error kind: it is
// read from the batch's events); "" when the batch did not add e.
func (c Change) ErrorKind(e *Entry) events.ErrorKind {
	for _, ev := range c.w.errs {
		if ev.EventID == e.EventID && ev.Attempt == e.Attempt && ev.Error != nil {
			return ev.Error.Kind
		}
	}
	return ""
}

// observesChanges reports whether the aggregator's Observer wants the
// changes, so that the batch keeps what they need.
func (b *batcher) observesChanges() bool {
	_, ok := b.agg.cfg.Observer.(ChangeObserver)
	return ok
}

// noteFolded keeps an event that changed its record, when it failed and
// the changes are observed: its error kind is not in the record. Only
// failed attempts are kept, so most events cost nothing.
func (w *reqWork) noteFolded(ev *events.Attempt, observed bool) {
	if observed && ev.Error != nil {
		w.errs = append(w.errs, ev)
	}
}

// reportChanges tells the Observer of the changes of a committed job, if
// it wants them.
func (b *batcher) reportChanges(j *job) {
	if co, ok := b.agg.cfg.Observer.(ChangeObserver); ok {
		co.RequestsCommitted(Changes{ws: j.reqWritten})
	}
}

// NewChange returns the change of one request record from was (nil: the
// ledger had none) to now, failed being the failed events the batch
// folded into it (what ErrorKind reads). It is how a ChangeObserver is
// fed without an aggregator, e.g. to test what it does with a batch that
// holds several events of one request: which events share a batch
// depends on when the stream delivers them.
func NewChange(was, now *Request, failed ...*events.Attempt) Change {
	return Change{w: &reqWork{rec: now, was: was, errs: failed}}
}

// NewChanges returns the changes of one batch.
func NewChanges(cs ...Change) Changes {
	ws := make([]*reqWork, len(cs))
	for i, c := range cs {
		ws[i] = c.w
	}
	return Changes{ws: ws}
}
