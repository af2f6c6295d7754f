package events

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
)

// labelsOf builds n valid pairs k00=v00, k01=v01...
func labelsOf(n int) map[string]any {
	l := make(map[string]any, n)
	for i := range n {
		l[fmt.Sprintf("k%02d", i)] = fmt.Sprintf("v%02d", i)
	}
	return l
}

// TestDecodeLabels: the labels member decodes to api.Labels, and every
// rule it can break is an invalid_field reject whose field names the
// label (labels["KEY"], or labels for the count and the type) and whose
// detail words the rule. Decode and the reference decoder agree on each.
func TestDecodeLabels(t *testing.T) {
	key32, val128 := "k"+strings.Repeat("x", api.MaxLabelKeyLength-1), strings.Repeat("é", api.MaxLabelValueLength/2)
	tests := []struct {
		name  string
		m     mutation
		text  func(string) string
		want  api.Labels // accepted: the labels decoded
		field string     // rejected: the *FieldError's field
		rule  string     // rejected: a part of the detail
		label bool       // rejected by a rule of api.Labels: the error is an *api.LabelError too
	}{
		{name: "two pairs", m: set("labels", map[string]any{"team": "search", "user": "u-42"}), want: api.Labels{"team": "search", "user": "u-42"}},
		{name: "null is none", m: set("labels", nil)},
		{name: "empty object is none", m: set("labels", map[string]any{})},
		{name: "sixteen pairs", m: set("labels", labelsOf(api.MaxLabels)), want: func() api.Labels {
			l := api.Labels{}
			for k, v := range labelsOf(api.MaxLabels) {
				l[k] = v.(string)
			}
			return l
		}()},
		{name: "longest key and value", m: set("labels", map[string]any{key32: val128}), want: api.Labels{key32: val128}},
		{name: "unicode and escapes in a value", m: set("labels", raw(`{"note":"caf\u00e9 \"q\" <b> 😀"}`)), want: api.Labels{"note": `café "q" <b> 😀`}},
		{name: "escaped key", m: set("labels", raw(`{"t\u0065am":"x"}`)), want: api.Labels{"team": "x"}},
		{name: "key given twice: the last counts", text: replace(`"provider_request_id"`, `"labels": {"team": "a", "team": "b"}, "provider_request_id"`), want: api.Labels{"team": "b"}},
		{name: "labels given twice: the last counts", text: replace(`"provider_request_id"`, `"labels": {"x": 1}, "labels": {"team": "b"}, "provider_request_id"`), want: api.Labels{"team": "b"}},

		{name: "not an object", m: set("labels", raw(`["team=search"]`)), field: "labels", rule: "must be a JSON object, got a JSON array"},
		{name: "a string", m: set("labels", "team=search"), field: "labels", rule: "must be a JSON object, got a JSON string"},
		{name: "value a number", m: set("labels", raw(`{"team":1}`)), field: `labels["team"]`, rule: "must be a JSON string, got a JSON number"},
		{name: "value null", m: set("labels", raw(`{"team":null}`)), field: `labels["team"]`, rule: "must be a JSON string, got a JSON null"},
		{name: "value an object", m: set("labels", raw(`{"team":{"a":"b"}}`)), field: `labels["team"]`, rule: "got a JSON object"},
		{name: "value invalid UTF-8", m: set("labels", raw("{\"team\":\"a\xffb\"}")), field: `labels["team"]`, rule: "must be valid UTF-8"},
		{name: "value lone surrogate", m: set("labels", raw(`{"team":"a\ud800"}`)), field: `labels["team"]`, rule: "must be valid UTF-8"},
		{name: "type errors in key order", m: set("labels", raw(`{"zz":1,"aa":true}`)), field: `labels["aa"]`, rule: "got a JSON boolean"},
		{name: "seventeen pairs", m: set("labels", labelsOf(api.MaxLabels+1)), field: "labels", rule: "must hold at most 16 pairs, got 17", label: true},
		{name: "empty key", m: set("labels", raw(`{"":"x"}`)), field: "labels", rule: "key must be 1 to 32 bytes, got 0", label: true},
		{name: "key too long", m: set("labels", map[string]any{key32 + "x": "v"}), field: fmt.Sprintf("labels[%q]", key32+"x"), rule: "key must be 1 to 32 bytes, got 33", label: true},
		{name: "key upper case", m: set("labels", raw(`{"Team":"x"}`)), field: `labels["Team"]`, rule: "key must be a lower-case letter followed by", label: true},
		{name: "key starts with a digit", m: set("labels", raw(`{"1team":"x"}`)), field: `labels["1team"]`, rule: "key must be a lower-case letter", label: true},
		{name: "key with a dash", m: set("labels", raw(`{"team-a":"x"}`)), field: `labels["team-a"]`, rule: "key must be a lower-case letter", label: true},
		{name: "key invalid UTF-8", m: set("labels", raw("{\"te\xffam\":\"x\"}")), field: `labels["te�am"]`, rule: "key must be a lower-case letter", label: true},
		{name: "empty value", m: set("labels", raw(`{"team":""}`)), field: `labels["team"]`, rule: "value must be 1 to 128 bytes, got 0", label: true},
		{name: "value too long", m: set("labels", map[string]any{"team": val128 + "x"}), field: `labels["team"]`, rule: "value must be 1 to 128 bytes, got 129", label: true},
		{name: "value with a newline", m: set("labels", raw(`{"team":"a\nb"}`)), field: `labels["team"]`, rule: "value must not hold control characters", label: true},
		{name: "value with DEL", m: set("labels", raw(`{"team":"a\u007fb"}`)), field: `labels["team"]`, rule: "value must not hold control characters", label: true},
		{name: "value with a C1 control", m: set("labels", raw(`{"team":"a\u0085b"}`)), field: `labels["team"]`, rule: "value must not hold control characters", label: true},
		{name: "rules in key order", m: set("labels", raw(`{"zz":"","Aa":"x"}`)), field: `labels["Aa"]`, rule: "key must be a lower-case letter", label: true},
	}
	for _, base := range []string{successFile, errorFile} {
		for _, tt := range tests {
			t.Run(base+"/"+tt.name, func(t *testing.T) {
				var in []byte
				if tt.text != nil {
					in = []byte(tt.text(string(readTestdata(t, base))))
				} else {
					in = mutated(t, base, tt.m)
				}
				requireSameDecode(t, in)
				got, err := Decode(in)
				labelSets := NewLabelInterner(0)
				for range 2 { // the second from the interner when accepted
					iev, ierr := DecodeInterned(in, labelSets)
					if err != nil {
						require.EqualError(t, ierr, err.Error())
					} else {
						require.NoError(t, ierr)
						assert.Equal(t, got, iev)
					}
				}
				if tt.field == "" {
					require.NoError(t, err)
					assert.Equal(t, tt.want, got.Labels)
					return
				}
				re := requireReject(t, err, ReasonInvalidField, tt.field)
				assert.Contains(t, re.Detail, tt.rule)
				var le *api.LabelError
				assert.Equal(t, tt.label, assertAs(err, &le), "an *api.LabelError when a rule of api.Labels is broken")
				if tt.label {
					assert.Equal(t, le.Rule, re.Err.(*FieldError).Rule)
				}
			})
		}
	}
}

// assertAs is errors.As without the test failing when it is false.
func assertAs(err error, target **api.LabelError) bool {
	for _, e := range unwrapAll(err) {
		if le, ok := e.(*api.LabelError); ok {
			*target = le
			return true
		}
	}
	return false
}

func unwrapAll(err error) []error {
	out := []error{err}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			out = append(out, unwrapAll(next)...)
		}
	case interface{ Unwrap() []error }:
		for _, next := range u.Unwrap() {
			out = append(out, unwrapAll(next)...)
		}
	}
	return out
}

// Labels go through Marshal and Decode whole; Marshal writes them as
// encoding/json writes a map (keys sorted, HTML-safe escapes), last, and
// omits none or empty ones.
func TestMarshalLabels(t *testing.T) {
	a := wantError(t)
	a.Labels = api.Labels{"user": "u-42", "team": "search", "note": `<&> "é" ` + "\u2028"}
	require.NoError(t, a.Validate())
	data, err := Marshal(&a)
	require.NoError(t, err)
	ref, err := refMarshal(&a)
	require.NoError(t, err)
	require.Equal(t, string(ref), string(data))
	require.True(t, strings.HasSuffix(string(data), `,"labels":{"note":"\u003c\u0026\u003e \"é\" \u2028","team":"search","user":"u-42"}}`), "%s", data)
	back, err := Decode(data)
	require.NoError(t, err)
	require.Equal(t, &a, back)

	for _, none := range []api.Labels{nil, {}} {
		a.Labels = none
		data, err := Marshal(&a)
		require.NoError(t, err)
		require.NotContains(t, string(data), "labels")
	}
}

// An invalid attempt's labels make Validate name the label and the rule,
// as Decode does.
func TestValidateLabels(t *testing.T) {
	for _, tt := range []struct {
		labels api.Labels
		field  string
	}{
		{nil, ""},
		{api.Labels{"team": "search"}, ""},
		{api.Labels{"Team": "search"}, `labels["Team"]`},
		{api.Labels{"team": ""}, `labels["team"]`},
		{api.Labels{"team": "a\x00"}, `labels["team"]`},
		{api.Labels{"team": "\xff"}, `labels["team"]`},
		{api.Labels{strings.Repeat("k", 100): "v"}, `labels["` + strings.Repeat("k", 64) + `…"]`},
	} {
		a := wantSuccess(t)
		a.Labels = tt.labels
		err := a.Validate()
		assert.Equal(t, refValidate(&a), err)
		if tt.field == "" {
			assert.NoError(t, err)
			continue
		}
		var fe *FieldError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, tt.field, fe.Field)
		var le *api.LabelError
		require.ErrorAs(t, err, &le)
		assert.ErrorIs(t, err, ErrInvalidField)
	}
}

func TestDecodeInternedSharesLabelSets(t *testing.T) {
	body := func(labels string) []byte {
		return mutated(t, successFile, set("labels", raw(labels)))
	}
	ptr := func(l api.Labels) uintptr { return reflect.ValueOf(l).Pointer() }
	decode := func(in *LabelInterner, labels string) api.Labels {
		t.Helper()
		ev, err := DecodeInterned(body(labels), in)
		require.NoError(t, err)
		return ev.Labels
	}
	in := NewLabelInterner(3)
	a := decode(in, `{"team":"search","user":"u-1"}`)
	tests := []struct {
		name   string
		labels string
		shared bool
	}{
		{"the same set", `{"team":"search","user":"u-1"}`, true},
		{"the same set in another order, spaced", `{ "user" : "u-1", "team":"search" }`, true},
		{"the same set escaped", `{"t\u0065am":"se\u0061rch","user":"u-1"}`, true},
		{"another value", `{"team":"search","user":"u-2"}`, false},
		{"a key less", `{"team":"search"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := decode(in, tt.labels)
			want, err := Decode(body(tt.labels))
			require.NoError(t, err)
			assert.Equal(t, want.Labels, l, "the labels Decode gives")
			assert.Equal(t, tt.shared, ptr(l) == ptr(a), "shared with the first event's set")
		})
	}
	// The same bytes split elsewhere are another set.
	ab, abSplit := decode(in, `{"a":"bc"}`), decode(in, `{"ab":"c"}`)
	assert.Equal(t, api.Labels{"a": "bc"}, ab)
	assert.Equal(t, api.Labels{"ab": "c"}, abSplit)
	assert.LessOrEqual(t, in.Len(), 3, "never more sets than its size: it forgets them all when full")
	assert.Nil(t, decode(in, `{}`), "no labels is nil, never an interned empty set")

	// Sets of the longest labels fill it by their bytes, not their number.
	big := NewLabelInterner(0)
	for i := range 2000 {
		l := map[string]any{}
		for k := range api.MaxLabels {
			l[fmt.Sprintf("k%031d", k)] = fmt.Sprintf("%0128d", i)
		}
		ev, err := DecodeInterned(mutated(t, successFile, set("labels", l)), big)
		require.NoError(t, err)
		require.Len(t, ev.Labels, api.MaxLabels)
	}
	assert.Less(t, big.Len(), InternedLabelBytes/(api.MaxLabels*(32+128)*2), "about InternedLabelBytes of sets at most")
	assert.Positive(t, big.Len())

	// Without an interner, every event has its own map.
	b1, b2 := decode(nil, `{"team":"search"}`), decode(nil, `{"team":"search"}`)
	assert.NotEqual(t, ptr(b1), ptr(b2))
}
