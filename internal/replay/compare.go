package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// compareFinished compares a finished request with the live record read
// when it was first met. That record was read after the checkpoint p was
// committed, so one written at or before p is the request at p; one
// written later, at s, is the request at s: the replay holds the request
// at every sequence from p to the target, and past the target it applies
// the request's own later events, read by subject.
func (v *verifier) compareFinished(ctx context.Context, r *openReq, atP *projection.Request) error {
	id, owner := r.rec.RequestID, r.rec.SessionID
	if !r.inLive {
		v.checkRequest(id, v.p, nil, false, atP)
		return v.drift.add(ctx, id, owner)
	}
	seq, ok := watermark(r.live)
	if !ok || !v.liveSessionIs(r.live, id, owner) {
		if err := v.drift.add(ctx, id, owner); err != nil {
			return err
		}
	}
	switch {
	case !ok || seq <= v.p:
		v.checkRequest(id, v.p, r.live, true, atP)
	case seq <= v.target:
		v.checkRequest(id, seq, r.live, true, v.stateAt(r, seq))
	default:
		st := cloneRequest(r.rec)
		err := nextBySubject(ctx, v.nc, names.AttemptsStream, events.Subject(owner, id), v.target+1, seq, func(m rawMsg) bool {
			if ev, err := projection.Accept(m.subject, m.data); err == nil {
				projection.Fold(st, ev, v.apply)
			}
			return true
		})
		if err != nil {
			return err
		}
		v.checkRequest(id, seq, r.live, true, st)
	}
	return nil
}

// checkRequest compares a live record (when inLive) with the recomputed
// request (re, absent when nil or without events) at stream sequence seq.
func (v *verifier) checkRequest(id string, seq uint64, live []byte, inLive bool, re *projection.Request) {
	inRe := re != nil && re.Exists()
	if !inLive && !inRe {
		return
	}
	d := v.c.d
	d.RequestsChecked++
	if inLive && inRe && v.sameContract(live, re) {
		return
	}
	var lv, rv *projection.RequestView
	if inLive {
		var rec struct{ projection.RequestView }
		if err := json.Unmarshal(live, &rec); err != nil {
			r := &record{c: v.c, kind: KindRequest, id: id, seq: seq}
			r.add(FieldRecord, "unreadable: "+err.Error(), presence(inRe), nil)
			d.RequestsDiffer++
			return
		}
		lv = &rec.RequestView
	}
	if inRe {
		view := re.View()
		rv = &view
	}
	if v.c.request(id, seq, lv, rv) {
		d.RequestsDiffer++
	}
}

// sameContract reports whether a stored request record has exactly the
// contract fields of re: the stored form (projection's codec) starts with
// them, in a fixed order and encoding, before the projection's own
// ("log"). A record that fails this test is decoded and compared field by
// field, so an older encoding shows no difference.
func (v *verifier) sameContract(live []byte, re *projection.Request) bool {
	v.buf = appendContract(v.buf[:0], &re.RequestView)
	return bytes.HasPrefix(live, v.buf)
}

// appendContract appends the beginning of a request's stored form, up to
// its "log".
func appendContract(b []byte, r *projection.RequestView) []byte {
	b = append(b, '{')
	for i, f := range [...]struct{ name, value string }{
		{"request_id", r.RequestID}, {"session_id", r.SessionID}, {"provider", r.Provider}, {"model", r.Model}, {"status", r.Status},
	} {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, '"'), f.name...), `":`...)
		b = events.AppendString(b, f.value)
	}
	b = strconv.AppendInt(append(b, `,"attempts":`...), int64(r.Attempts), 10)
	b = strconv.AppendInt(append(b, `,"winning_attempt":`...), int64(r.WinningAttempt), 10)
	b = events.AppendUsage(append(b, `,"usage":`...), r.Usage)
	b = events.AppendUsage(append(b, `,"billed":`...), r.Billed)
	if r.EstimatedInputTokens != 0 { // a member only when there is one, as the codec writes it
		b = strconv.AppendInt(append(b, `,"estimated_input_tokens":`...), r.EstimatedInputTokens, 10)
	}
	b = strconv.AppendInt(append(b, `,"usage_cost":`...), int64(r.UsageCost), 10)
	b = strconv.AppendInt(append(b, `,"billed_cost":`...), int64(r.BilledCost), 10)
	b = strconv.AppendInt(append(b, `,"unpriced_usage_tokens":`...), r.UnpricedUsageTokens, 10)
	b = strconv.AppendInt(append(b, `,"unpriced_billed_tokens":`...), r.UnpricedBilledTokens, 10)
	b = append(events.AppendTime(append(b, `,"first_started_at":"`...), r.FirstStartedAt), '"')
	b = append(events.AppendTime(append(b, `,"last_finished_at":"`...), r.LastFinishedAt), '"')
	if len(r.Labels) > 0 { // each of issue 20's members only when there is one, as the codec writes them
		b = append(b, `,"labels":{`...)
		for i, k := range slices.Sorted(maps.Keys(r.Labels)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(events.AppendString(b, k), ':')
			b = events.AppendString(b, r.Labels[k])
		}
		b = append(b, '}')
	}
	if r.LabelConflicts != 0 {
		b = strconv.AppendInt(append(b, `,"label_conflicts":`...), r.LabelConflicts, 10)
	}
	if c := r.Cell; c != nil {
		b = append(events.AppendTime(append(b, `,"cell":{"hour":"`...), c.Hour), '"')
		b = events.AppendString(append(b, `,"provider":`...), c.Provider)
		b = append(events.AppendString(append(b, `,"model":`...), c.Model), '}')
	}
	return append(b, `,"log":`...)
}

// watermark returns the "seq" of a stored request record: the batch that
// last wrote it. No string in a record holds `"seq":` unescaped, and
// "held" has no seq, so the last occurrence is the field.
func watermark(live []byte) (uint64, bool) {
	i := bytes.LastIndex(live, []byte(`"seq":`))
	if i < 0 {
		return 0, false
	}
	rest := live[i+len(`"seq":`):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	seq, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	return seq, err == nil
}

// liveSessionIs reports whether a stored request record is id's under
// session: the stored form starts with both.
func (v *verifier) liveSessionIs(live []byte, id, session string) bool {
	b := append(v.buf[:0], `{"request_id":`...)
	b = events.AppendString(b, id)
	b = append(b, `,"session_id":`...)
	b = events.AppendString(b, session)
	b = append(b, ',')
	v.buf = b
	if bytes.HasPrefix(live, b) {
		return true
	}
	s, err := liveSession(live) // another encoding
	return err == nil && s == session
}

func liveSession(live []byte) (string, error) {
	var r struct {
		SessionID string `json:"session_id"`
	}
	err := json.Unmarshal(live, &r)
	return r.SessionID, err
}
