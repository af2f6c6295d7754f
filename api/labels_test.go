package api_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
)

func TestLabelsValidate(t *testing.T) {
	many := api.Labels{}
	for i := range api.MaxLabels + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, tt := range []struct {
		name      string
		l         api.Labels
		key, rule string // "" rule: valid
	}{
		{"nil", nil, "", ""},
		{"two", api.Labels{"team": "search", "user": "u-42"}, "", ""},
		{"longest", api.Labels{"k" + strings.Repeat("_", 31): strings.Repeat("é", 64)}, "", ""},
		{"seventeen", many, "", "must hold at most 16 pairs, got 17"},
		{"empty key", api.Labels{"": "v"}, "", "key must be 1 to 32 bytes, got 0"},
		{"long key", api.Labels{strings.Repeat("k", 33): "v"}, strings.Repeat("k", 33), "key must be 1 to 32 bytes, got 33"},
		{"upper case", api.Labels{"Team": "v"}, "Team", "key must be a lower-case letter followed by lower-case letters, digits and '_'"},
		{"leading digit", api.Labels{"9a": "v"}, "9a", "key must be a lower-case letter"},
		{"leading underscore", api.Labels{"_a": "v"}, "_a", "key must be a lower-case letter"},
		{"dot", api.Labels{"a.b": "v"}, "a.b", "key must be a lower-case letter"},
		{"empty value", api.Labels{"team": ""}, "team", "value must be 1 to 128 bytes, got 0"},
		{"long value", api.Labels{"team": strings.Repeat("v", 129)}, "team", "value must be 1 to 128 bytes, got 129"},
		{"invalid UTF-8", api.Labels{"team": "\xff"}, "team", "value must be valid UTF-8"},
		{"tab", api.Labels{"team": "a\tb"}, "team", "value must not hold control characters"},
		{"first in key order", api.Labels{"b": "", "a": ""}, "a", "value must be 1 to 128 bytes, got 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate()
			if tt.rule == "" {
				require.NoError(t, err)
				return
			}
			var le *api.LabelError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.key, le.Key)
			assert.Contains(t, le.Rule, tt.rule)
		})
	}
}

func TestParseLabels(t *testing.T) {
	for _, tt := range []struct {
		in        string
		want      api.Labels
		key, rule string // rejected: the *LabelError's key and a part of its rule
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "team=search", want: api.Labels{"team": "search"}},
		{in: "team=search, user=u-42", want: api.Labels{"team": "search", "user": "u-42"}},
		{in: " team = search ,\tuser=u-42\t", want: api.Labels{"team": "search", "user": "u-42"}},
		{in: "note=caf%C3%A9%2C%20ok%3D1%25", want: api.Labels{"note": "café, ok=1%"}},
		{in: "note=a+b", want: api.Labels{"note": "a+b"}},
		{in: "note=%20lead", want: api.Labels{"note": " lead"}},
		{in: "team=search,", rule: "pair 2 is empty"},
		{in: ",team=search", rule: "pair 1 is empty"},
		{in: "team", rule: `pair 1 ("team") has no '='`},
		{in: "team=a,team=b", key: "team", rule: "key is given twice"},
		{in: "Team=a", key: "Team", rule: "key must be a lower-case letter"},
		{in: "=a", rule: "key must be 1 to 32 bytes, got 0"},
		{in: "team=", key: "team", rule: "value must be 1 to 128 bytes, got 0"},
		{in: "team=%zz", key: "team", rule: "bad percent escape"},
		{in: "team=%ff", key: "team", rule: "value must be valid UTF-8"},
		{in: "team=a%0Ab", key: "team", rule: "value must not hold control characters"},
		{in: strings.Repeat("k=v,", 8) + "a=1,b=2,c=3,d=4,e=5,f=6,g=7,h=8,i=9", key: "k", rule: "key is given twice"},
		{in: "a=1,b=2,c=3,d=4,e=5,f=6,g=7,h=8,i=9,j=10,k=11,l=12,m=13,n=14,o=15,p=16,q=17", rule: "must hold at most 16 pairs, got 17"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := api.ParseLabels(tt.in)
			if tt.rule == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				if got != nil {
					back, err := api.ParseLabels(api.FormatLabels(got))
					require.NoError(t, err)
					assert.Equal(t, got, back, "FormatLabels writes what ParseLabels reads")
				}
				return
			}
			require.Nil(t, got)
			var le *api.LabelError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.key, le.Key)
			assert.Contains(t, le.Rule, tt.rule)
		})
	}
}

func TestFormatLabels(t *testing.T) {
	l := api.Labels{"user": "u-42", "team": "search", "note": " café, x=1% "}
	assert.Equal(t, "note=%20caf%C3%A9%2C x%3D1%25%20,team=search,user=u-42", api.FormatLabels(l))
	assert.Equal(t, "", api.FormatLabels(nil))
}

func TestLabelsMerge(t *testing.T) {
	defaults := api.Labels{"team": "search", "env": "prod"}
	call := api.Labels{"team": "ads", "user": "u-42"}
	assert.Equal(t, api.Labels{"team": "ads", "env": "prod", "user": "u-42"}, defaults.Merge(call))
	assert.Equal(t, api.Labels{"team": "search", "env": "prod"}, defaults, "Merge does not modify its receiver")
	assert.Equal(t, defaults, defaults.Merge(nil))
	assert.Nil(t, api.Labels(nil).Merge(api.Labels{}))
}

// Labels are checked against the contract's rules; the error names the
// key and the rule.
func ExampleParseLabels() {
	l, err := api.ParseLabels("team=search, user=u-42")
	fmt.Println(l, err)
	_, err = api.ParseLabels("team=search, Team=ads")
	var le *api.LabelError
	fmt.Println(errors.As(err, &le), le.Key, err)
	// Output:
	// map[team:search user:u-42] <nil>
	// true Team labels["Team"]: key must be a lower-case letter followed by lower-case letters, digits and '_'
}
