package ledger

import "github.com/agentledger/ledger/api"

// Labels attribute a call to whoever answers for it (team=search,
// user=u-42): every attempt's event carries them, and the ledger keeps a
// request's labels (those of its first accepted attempt) in its record and
// its rollups. Set defaults with WithLabels and more on each Call
// (Call.Labels); a key set on the Call wins. The rules are
// docs/contract.md's: at most MaxLabels pairs, keys of
// [a-z][a-z0-9_]* up to MaxLabelKeyLength bytes, values of 1 to
// MaxLabelValueLength bytes of UTF-8 without control characters.
type Labels = api.Labels

// LabelError says which label breaks which rule: the error of a call or
// an option whose labels are invalid matches it with errors.As.
type LabelError = api.LabelError

// Limits of labels.
const (
	MaxLabels           = api.MaxLabels           // 16 pairs
	MaxLabelKeyLength   = api.MaxLabelKeyLength   // 32 bytes
	MaxLabelValueLength = api.MaxLabelValueLength // 128 bytes
)

// ParseLabels reads labels written as text, the form of the gateway's
// X-Ledger-Labels header and of the --labels flags: comma-separated
// key=value pairs, values percent-encoded where they hold a comma, an
// '=', a '%' or a byte that is not printable ASCII ("team=search,
// user=u-42"). The error is a *LabelError naming the key and the rule.
func ParseLabels(s string) (Labels, error) { return api.ParseLabels(s) }

// FormatLabels writes labels in the form ParseLabels reads, keys sorted.
func FormatLabels(l Labels) string { return api.FormatLabels(l) }
