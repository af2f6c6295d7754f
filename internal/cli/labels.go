package cli

import (
	"github.com/agentledger/ledger/api"
)

// Labels is the flag.Value of the commands' --labels: default labels
// written as api.ParseLabels reads them ("team=search,env=prod"). The
// flag may be given more than once; a key given twice is refused, as a
// bad pair is, with the *api.LabelError naming the key and the rule.
type Labels struct {
	L api.Labels // nil until set
}

// String writes the labels as Set reads them.
func (f *Labels) String() string {
	if f == nil {
		return ""
	}
	return api.FormatLabels(f.L)
}

// Set adds the pairs of s.
func (f *Labels) Set(s string) error {
	l, err := api.ParseLabels(s)
	if err != nil {
		return err
	}
	for k := range l {
		if _, dup := f.L[k]; dup {
			return &api.LabelError{Key: k, Rule: "key is given twice"}
		}
	}
	merged := f.L.Merge(l)
	if err := merged.Validate(); err != nil {
		return err
	}
	f.L = merged
	return nil
}

// LabelsUsage is the usage text of a --labels flag, after what it labels.
const LabelsUsage = "comma-separated key=value pairs (\"team=search,env=prod\"; values percent-encoded where they hold ',', '=', '%' or other than printable ASCII); keys [a-z][a-z0-9_]*, at most 16 pairs (docs/contract.md, Labels)"
