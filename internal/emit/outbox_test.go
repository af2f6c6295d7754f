package emit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/natstest"
)

// restartServer starts srv again, as after an outage, and returns a new
// connection to it.
func restartServer(t *testing.T, srv *natstest.Server) jetstream.JetStream {
	t.Helper()
	_, js := srv.Restart(t).Connect(t)
	return js
}

func closeQuickly(t *testing.T, p *Publisher) (Stats, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	return p.Close(ctx)
}

func TestOutboxKeepsUndeliveredEventsForTheNextPublisher(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	ensureStream(t, js)
	dir := t.TempDir()
	p := newPublisher(t, js, WithOutbox(dir))
	ctx := testContext(t)

	before := makeEvents("before", 5)
	publishAll(t, p, before)
	require.NoError(t, p.Flush(ctx))
	assert.Zero(t, p.Stats().OutboxEvents, "acked events leave the outbox")

	srv.Shutdown()
	during := makeEvents("during", 7)
	publishAll(t, p, during)
	assert.Equal(t, uint64(7), p.Stats().OutboxEvents)
	info, err := InspectOutbox(dir)
	require.NoError(t, err)
	assert.Equal(t, 7, info.Events, "on disk before Publish returned")

	st, err := closeQuickly(t, p)
	var ue *UndeliveredError
	require.ErrorAs(t, err, &ue)
	assert.True(t, ue.AllKept())
	assert.Contains(t, err.Error(), "7 kept in outbox "+dir)
	assert.Equal(t, uint64(7), st.Kept)

	js = restartServer(t, srv)
	p2 := newPublisher(t, js, WithOutbox(dir))
	assert.Equal(t, uint64(7), p2.Stats().Recovered)
	require.NoError(t, p2.Flush(ctx))
	st2, err := p2.Close(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), st2.Acked)
	assert.Zero(t, st2.OutboxEvents)
	requireLanded(t, js, append(before, during...))
	info, err = InspectOutbox(dir)
	require.NoError(t, err)
	assert.Zero(t, info.Events)
}

// An event acked by the stream but still in the outbox (a crash before its
// record was reclaimed) is published again and dropped as a duplicate.
func TestOutboxReplayOfDeliveredEventsIsDeduplicated(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	ensureStream(t, js)
	ctx := testContext(t)
	evs := makeEvents("acked", 4)
	p := newPublisher(t, js)
	publishAll(t, p, evs)
	require.NoError(t, p.Flush(ctx))

	dir := t.TempDir()
	writeOutbox(t, dir, evs)
	p2 := newPublisher(t, js, WithOutbox(dir))
	require.NoError(t, p2.Flush(ctx))
	st := p2.Stats()
	assert.Equal(t, uint64(4), st.Recovered)
	assert.Equal(t, uint64(4), st.Duplicates)
	requireLanded(t, js, evs)
}

// writeOutbox leaves evs in an outbox in dir, as a Publisher killed before
// their acks would.
func writeOutbox(t *testing.T, dir string, evs []events.Attempt) {
	t.Helper()
	ob, recs, err := openOutbox(dir, DefaultOutboxMaxEvents, DefaultOutboxMaxBytes)
	require.NoError(t, err)
	require.Empty(t, recs)
	for i := range evs {
		data, err := events.Marshal(&evs[i])
		require.NoError(t, err)
		it := item{subject: events.Subject(evs[i].SessionID, evs[i].RequestID), msgID: evs[i].EventID, data: data}
		require.NoError(t, ob.add(t.Context(), nil, &it))
	}
	require.NoError(t, ob.close())
}

func TestFullOutboxRefusesWithAnError(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	ensureStream(t, js)
	srv.Shutdown()
	p := newPublisher(t, js, WithOutbox(t.TempDir()), WithOutboxLimits(2, 1<<20))
	publishAll(t, p, makeEvents("fits", 2))

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	ev := sampleEvent("s", "r", "evt-over")
	err := p.Publish(ctx, &ev)
	require.ErrorIs(t, err, ErrOutboxFull)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "holds 2 event(s)")
	st, _ := closeQuickly(t, p)
	assert.Equal(t, Stats{Enqueued: 2, Undelivered: 2, Kept: 2, OutboxEvents: 2}, Stats{
		Enqueued: st.Enqueued, Undelivered: st.Undelivered, Kept: st.Kept, OutboxEvents: st.OutboxEvents,
	}, "the refused event was never counted nor kept")
}

func TestOutboxRecoversTheRecordsBeforeATornTail(t *testing.T) {
	dir := t.TempDir()
	evs := makeEvents("torn", 3)
	writeOutbox(t, dir, evs)
	segs, err := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	f, err := os.OpenFile(segs[0], os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{200, 0, 0, 0, 1, 2, 3, 4, '{'}) // a write cut short
	require.NoError(t, err)
	require.NoError(t, f.Close())

	info, err := InspectOutbox(dir)
	require.NoError(t, err)
	assert.Equal(t, OutboxInfo{Events: 3, Bytes: info.Bytes, Segments: 1, Torn: 1}, info)

	_, _, js := natstest.StartJS(t)
	ensureStream(t, js)
	p := newPublisher(t, js, WithOutbox(dir))
	require.NoError(t, p.Flush(testContext(t)))
	assert.Equal(t, uint64(3), p.Stats().Recovered)
	requireLanded(t, js, evs)
}

func TestOutboxHasOneOwner(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	dir := t.TempDir()
	newPublisher(t, js, WithOutbox(dir))
	_, err := New(js, WithOutbox(dir))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in use by another publisher")
}

func TestOutboxOptionsAreValidated(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithOutbox(""), "WithOutbox: directory must not be empty"},
		{WithOutboxLimits(0, 1), "WithOutboxLimits: events 0 must be at least 1"},
		{WithOutboxLimits(1, 0), "WithOutboxLimits: bytes 0 must be at least 1"},
	} {
		_, err := New(js, tc.opt)
		require.ErrorIs(t, err, ErrInvalidOption)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// A write the disk does not confirm is refused: Publish says so, and the
// event is neither counted nor kept.
func TestOutboxFsyncFailureRefusesTheEvent(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	ensureStream(t, js)
	p := newPublisher(t, js, WithOutbox(t.TempDir()))
	p.outbox.fsync = func(*os.File) error { return errors.New("injected: the disk is gone") }
	ev := sampleEvent("s", "r", "evt-unsynced")
	err := p.Publish(testContext(t), &ev)
	require.ErrorContains(t, err, "fsync: injected: the disk is gone")
	st := p.Stats()
	assert.Zero(t, st.Enqueued)
	assert.Zero(t, st.OutboxEvents)

	p.outbox.fsync = (*os.File).Sync
	ok := makeEvents("synced", 3)
	publishAll(t, p, ok)
	require.NoError(t, p.Flush(testContext(t)))
	requireLanded(t, js, ok)
}
