package replay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/natstest"
)

// Issue 19: `make bench` on a loaded machine ended at verify with exit 2,
// "slow consumer" on a pull consumer's inbox. Verify's bucket reader
// (eachKV: the live sessions, the window of live request records, the
// scratch buckets) read with Messages, whose channel holds exactly one
// pull's messages; but a pull with a byte limit that completes on its
// count ends with a "409 Batch Completed" status, one message more, and
// the next pull is asked while the last may still be on its way. A reader
// paused while both arrive (the window waits for the replay; a loaded
// machine starves it) made the client drop a status, and the connection's
// slow consumer failed verify.
//
// Here the bucket is being written, as a live ledger is: the first pull
// (1,024) finds 600 records; the reader takes 514, which asks for the next
// pull (513), and pauses; 1,000 more records complete both pulls. Once a
// second connection has seen both statuses and a flush of the reader's
// connection says it has processed them too, the reader goes on: nothing
// may have been dropped, and every record is read.
func TestPausedBucketReaderDropsNothing(t *testing.T) {
	srv, nc, js := natstest.StartJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "paused"})
	require.NoError(t, err)
	put := func(from, to int) error {
		for i := from; i < to; i++ {
			if _, err := js.PublishAsync(fmt.Sprintf("$KV.paused.k%04d", i), []byte(`{"n":1}`)); err != nil {
				return err
			}
		}
		select {
		case <-js.PublishAsyncComplete():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	require.NoError(t, put(0, 600))

	// The spy sees what the server sends to every inbox.
	spy, _ := srv.Connect(t)
	completed := make(chan struct{}, 2)
	_, err = spy.Subscribe("_INBOX.>", func(m *nats.Msg) {
		if m.Header.Get("Status") == "409" && m.Header.Get("Description") == "Batch Completed" {
			completed <- struct{}{}
		}
	})
	require.NoError(t, err)
	require.NoError(t, spy.Flush())

	slow := watchSlowConsumer(nc)
	defer slow.stop()
	read := 0
	err = eachKV(ctx, js, "KV_paused", "$KV.paused.", func(e kvEntry) error {
		read++
		if read != 514 {
			return nil
		}
		if err := put(600, 1600); err != nil {
			return err
		}
		for range 2 {
			select {
			case <-completed:
			case <-ctx.Done():
				return fmt.Errorf("the server did not complete both pulls: %w", ctx.Err())
			}
		}
		return nc.Flush()
	})
	require.NoError(t, err)
	require.NoError(t, slow.err(), "a reader that paused made the client drop a message")
	require.Equal(t, 1600, read)
}
