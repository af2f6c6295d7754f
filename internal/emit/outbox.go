package emit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Defaults of the outbox (see WithOutbox).
const (
	// DefaultOutboxMaxEvents is how many unacknowledged events the outbox
	// holds before Publish waits for room.
	DefaultOutboxMaxEvents = 16384
	// DefaultOutboxMaxBytes is how many bytes of unacknowledged events the
	// outbox holds before Publish waits for room.
	DefaultOutboxMaxBytes = 64 << 20
	// outboxSegmentBytes is the size past which the outbox starts a new
	// segment file; a segment is deleted once all its events are acked.
	outboxSegmentBytes = 4 << 20
)

const (
	segmentSuffix   = ".log"
	recordHeaderLen = 8 // payload length, CRC-32C of the payload
	lockName        = "LOCK"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrOutboxFull is wrapped by the error Publish returns when the outbox
// stayed full (WithOutboxLimits) until its context ended: the event was
// refused, not dropped, and the caller knows it.
var ErrOutboxFull = errors.New("emit: outbox full")

// outbox is the on-disk log of the events the Publisher holds: every event
// is written and fsynced before Publish returns, and forgotten once the
// stream acknowledged it. A new Publisher on the same directory publishes
// again whatever the log still holds.
//
// The log is a directory of segment files <id>.log, each a sequence of
// records: 4 bytes of payload length, 4 bytes of CRC-32C of the payload,
// then the payload (uvarint length and subject, uvarint length and event
// ID, the event's JSON). A segment grows to outboxSegmentBytes, then a new
// one starts; a sealed segment whose events were all acked is deleted, and
// the current one is truncated whenever every event it holds was acked. A
// torn record at the end of a segment (a crash during the write, before
// Publish could return) ends that segment's recovery.
//
// mu guards the segments and the counters; syncMu serializes fsyncs, so
// that Publish calls waiting on the same fsync share it (group commit).
type outbox struct {
	dir       string
	maxEvents int
	maxBytes  int64
	segBytes  int64
	lock      *os.File

	mu     sync.Mutex
	cur    *segment
	nextID uint64
	events int
	bytes  int64
	room   chan struct{} // closed and replaced whenever room frees up
	closed bool

	syncMu sync.Mutex
	// fsync is (*os.File).Sync; a fault seam for tests.
	fsync func(*os.File) error

	depth      atomic.Int64 // events, for Stats without the lock
	depthBytes atomic.Int64
}

// segment is one file of the log.
type segment struct {
	id      uint64
	path    string
	f       *os.File // nil for a segment recovered at open (never written again)
	written int64    // bytes in the file; guarded by outbox.mu
	synced  atomic.Int64
	pending int  // records not yet acked; guarded by outbox.mu
	sealed  bool // no more records; guarded by outbox.mu
}

// recovered is an event read back from the log at open.
type recovered struct {
	seg  *segment
	it   item
	size int64
}

// openOutbox locks dir (creating it), and reads back the events its log
// holds. The events recovered count against the limits.
func openOutbox(dir string, maxEvents int, maxBytes int64) (*outbox, []recovered, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("emit: outbox: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, lockName))
	if err != nil {
		return nil, nil, fmt.Errorf("emit: outbox %s: %w", dir, err)
	}
	o := &outbox{dir: dir, maxEvents: maxEvents, maxBytes: maxBytes, segBytes: outboxSegmentBytes, lock: lock,
		room: make(chan struct{}), fsync: (*os.File).Sync}
	recs, err := o.recover()
	if err != nil {
		_ = lock.Close()
		return nil, nil, err
	}
	return o, recs, nil
}

// segmentIDs lists the segment files of dir in order.
func segmentIDs(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("emit: outbox: %w", err)
	}
	var ids []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), segmentSuffix)
		if !ok || e.IsDir() {
			continue
		}
		id, err := strconv.ParseUint(name, 16, 64)
		if err != nil {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (o *outbox) segmentPath(id uint64) string {
	return filepath.Join(o.dir, fmt.Sprintf("%016x%s", id, segmentSuffix))
}

func (o *outbox) recover() ([]recovered, error) {
	ids, err := segmentIDs(o.dir)
	if err != nil {
		return nil, err
	}
	var recs []recovered
	for _, id := range ids {
		o.nextID = id + 1
		seg := &segment{id: id, path: o.segmentPath(id), sealed: true}
		data, err := os.ReadFile(seg.path)
		if err != nil {
			return nil, fmt.Errorf("emit: outbox: %w", err)
		}
		n := 0
		_ = decodeRecords(data, func(it item, size int64) {
			recs = append(recs, recovered{seg: seg, it: it, size: size})
			o.events++
			o.bytes += size
			n++
		})
		seg.pending = n
		if n == 0 {
			if err := os.Remove(seg.path); err != nil {
				return nil, fmt.Errorf("emit: outbox: %w", err)
			}
		}
	}
	o.depth.Store(int64(o.events))
	o.depthBytes.Store(o.bytes)
	return recs, nil
}

// decodeRecords calls fn for every intact record of data, in order, and
// returns an error describing the first torn or corrupt record (which ends
// the segment), or nil.
func decodeRecords(data []byte, fn func(it item, size int64)) error {
	for off := 0; off < len(data); {
		if len(data)-off < recordHeaderLen {
			return fmt.Errorf("torn record header at offset %d", off)
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		start := off + recordHeaderLen
		if n > len(data)-start {
			return fmt.Errorf("torn record at offset %d", off)
		}
		payload := data[start : start+n]
		if crc32.Checksum(payload, castagnoli) != sum {
			return fmt.Errorf("corrupt record at offset %d", off)
		}
		it, err := decodePayload(payload)
		if err != nil {
			return fmt.Errorf("record at offset %d: %w", off, err)
		}
		fn(it, int64(recordHeaderLen+n))
		off = start + n
	}
	return nil
}

func decodePayload(p []byte) (item, error) {
	r := bytes.NewReader(p)
	field := func() (string, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return "", io.ErrUnexpectedEOF
		}
		b := make([]byte, n)
		_, _ = r.Read(b)
		return string(b), nil
	}
	subject, err := field()
	if err != nil {
		return item{}, err
	}
	msgID, err := field()
	if err != nil {
		return item{}, err
	}
	data := make([]byte, r.Len())
	_, _ = r.Read(data)
	return item{subject: subject, msgID: msgID, data: data}, nil
}

func encodeRecord(it item) []byte {
	payload := binary.AppendUvarint(nil, uint64(len(it.subject)))
	payload = append(payload, it.subject...)
	payload = binary.AppendUvarint(payload, uint64(len(it.msgID)))
	payload = append(payload, it.msgID...)
	payload = append(payload, it.data...)
	rec := make([]byte, recordHeaderLen, recordHeaderLen+len(payload))
	binary.LittleEndian.PutUint32(rec, uint32(len(payload)))
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(payload, castagnoli))
	return append(rec, payload...)
}

// add waits for room (while ctx and closing allow), writes it to the log
// and waits for the write to be fsynced. On success it.seg and it.size
// say where the event is, for ack.
func (o *outbox) add(ctx context.Context, closing <-chan struct{}, it *item) error {
	rec := encodeRecord(*it)
	size := int64(len(rec))
	seg, end, err := o.write(ctx, closing, rec)
	if err != nil {
		return err
	}
	if err := o.waitSynced(seg, end); err != nil {
		o.ack(seg, size)
		return fmt.Errorf("emit: outbox %s: fsync: %w", o.dir, err)
	}
	it.seg, it.size = seg, size
	return nil
}

// write reserves room for rec and appends it to the current segment.
func (o *outbox) write(ctx context.Context, closing <-chan struct{}, rec []byte) (*segment, int64, error) {
	size := int64(len(rec))
	for {
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return nil, 0, ErrClosed
		}
		// An empty outbox takes any event, so that one larger than the byte
		// limit is not refused for ever.
		if o.events == 0 || (o.events < o.maxEvents && o.bytes+size <= o.maxBytes) {
			break
		}
		room := o.room
		events, bytes := o.events, o.bytes
		o.mu.Unlock()
		// Like the in-memory buffer: only a full outbox waits, so a context
		// already done matters only then.
		select {
		case <-room:
		case <-closing:
			return nil, 0, ErrClosed
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("%w: %s holds %d event(s), %d bytes (limits %d, %d) awaiting the stream's acks: %w",
				ErrOutboxFull, o.dir, events, bytes, o.maxEvents, o.maxBytes, ctx.Err())
		}
	}
	defer o.mu.Unlock()
	if o.cur != nil && o.cur.written > 0 && o.cur.written+size > o.segBytes {
		if err := o.seal(o.cur); err != nil {
			return nil, 0, err
		}
		o.cur = nil
	}
	if o.cur == nil {
		seg, err := o.newSegment()
		if err != nil {
			return nil, 0, err
		}
		o.cur = seg
	}
	seg := o.cur
	if _, err := seg.f.Write(rec); err != nil {
		// What was written of rec is a torn tail; start a new segment.
		_ = o.seal(seg)
		o.cur = nil
		return nil, 0, fmt.Errorf("emit: outbox %s: %w", o.dir, err)
	}
	seg.written += size
	seg.pending++
	o.events++
	o.bytes += size
	o.depth.Store(int64(o.events))
	o.depthBytes.Store(o.bytes)
	return seg, seg.written, nil
}

// newSegment creates the next segment file and makes its name durable.
func (o *outbox) newSegment() (*segment, error) {
	id := o.nextID
	o.nextID++
	path := o.segmentPath(id)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("emit: outbox: %w", err)
	}
	if err := syncDir(o.dir); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("emit: outbox %s: %w", o.dir, err)
	}
	return &segment{id: id, path: path, f: f}, nil
}

// seal ends seg: no record is written to it again. It is fsynced (Publish
// calls still waiting on it find it synced) and deleted when it holds no
// pending event. mu is held.
func (o *outbox) seal(seg *segment) error {
	seg.sealed = true
	if seg.f != nil {
		if err := o.fsync(seg.f); err != nil {
			return fmt.Errorf("emit: outbox %s: fsync: %w", o.dir, err)
		}
		seg.synced.Store(seg.written)
	}
	if seg.pending == 0 {
		o.remove(seg)
	}
	return nil
}

// remove deletes seg's file. mu is held.
func (o *outbox) remove(seg *segment) {
	if seg.f != nil {
		_ = seg.f.Close()
		seg.f = nil
	}
	_ = os.Remove(seg.path)
}

// waitSynced returns once seg is fsynced up to end. One caller fsyncs for
// every write made before it; the others find their write covered.
func (o *outbox) waitSynced(seg *segment, end int64) error {
	if seg.synced.Load() >= end {
		return nil
	}
	o.syncMu.Lock()
	defer o.syncMu.Unlock()
	if seg.synced.Load() >= end {
		return nil
	}
	o.mu.Lock()
	f, written := seg.f, seg.written
	o.mu.Unlock()
	if f == nil {
		// Sealed (and so synced) meanwhile, or removed: nothing left to do.
		return nil
	}
	if err := o.fsync(f); err != nil {
		return err
	}
	if seg.synced.Load() < written {
		seg.synced.Store(written)
	}
	return nil
}

// ack forgets an event the stream acknowledged (or that was never
// enqueued), and frees its room.
func (o *outbox) ack(seg *segment, size int64) {
	if seg == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	seg.pending--
	o.events--
	o.bytes -= size
	o.depth.Store(int64(o.events))
	o.depthBytes.Store(o.bytes)
	close(o.room)
	o.room = make(chan struct{})
	if seg.pending > 0 || o.closed {
		return
	}
	switch {
	case seg.sealed:
		o.remove(seg)
	case seg == o.cur && seg.written > 0:
		// Every event of the current segment is acked: start it afresh
		// rather than replay them at the next start. A crash before the
		// truncation reaches the disk only means duplicates, which the
		// stream and the projection drop.
		if err := seg.f.Truncate(0); err == nil {
			seg.written = 0
			seg.synced.Store(0)
		}
	}
}

// close closes the files and releases the lock; what the log holds stays
// for the next start.
func (o *outbox) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.closed = true
	var errs []error
	if o.cur != nil && o.cur.f != nil {
		if err := o.cur.f.Sync(); err != nil {
			errs = append(errs, err)
		}
		if o.cur.written == 0 && o.cur.pending == 0 {
			o.remove(o.cur)
		} else {
			errs = append(errs, o.cur.f.Close())
		}
	}
	close(o.room)
	errs = append(errs, o.lock.Close())
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// OutboxInfo is what an outbox directory holds.
type OutboxInfo struct {
	// Events is the number of intact event records in the log: events
	// not yet acknowledged, and possibly some acknowledged ones whose
	// segment is not reclaimed yet (the next start publishes them again;
	// the stream and the projection drop the copies).
	Events int
	// Bytes is the size of those records.
	Bytes int64
	// Segments is the number of segment files.
	Segments int
	// Torn is the number of segments that end in a torn or corrupt
	// record (a crash during a write, before its Publish returned).
	Torn int
}

// InspectOutbox reads the outbox in dir without locking it or changing
// it, for operators and tests: what a Publisher started with
// WithOutbox(dir) would publish again.
func InspectOutbox(dir string) (OutboxInfo, error) {
	var info OutboxInfo
	ids, err := segmentIDs(dir)
	if err != nil {
		return info, err
	}
	for _, id := range ids {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%016x%s", id, segmentSuffix)))
		if errors.Is(err, os.ErrNotExist) {
			continue // reclaimed meanwhile
		}
		if err != nil {
			return info, fmt.Errorf("emit: outbox: %w", err)
		}
		info.Segments++
		if decodeRecords(data, func(_ item, size int64) { info.Events++; info.Bytes += size }) != nil {
			info.Torn++
		}
	}
	return info, nil
}
