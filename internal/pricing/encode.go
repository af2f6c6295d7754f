package pricing

import (
	"encoding/json"
	"time"
)

// fileEntry is an entry as a catalog file writes it, every rate given.
type fileEntry struct {
	Provider      string `json:"provider"`
	Model         string `json:"model"`
	ServiceTier   string `json:"service_tier,omitempty"`
	EffectiveFrom string `json:"effective_from"`
	fileRates
	Tiers  []fileTier `json:"tiers,omitempty"`
	Source string     `json:"source"`
	ReadOn string     `json:"read_on"`
	Note   string     `json:"note,omitempty"`
}

type fileTier struct {
	AboveInputTokens int64 `json:"above_input_tokens"`
	fileRates
}

type fileRates struct {
	Input        string `json:"input"`
	Output       string `json:"output"`
	CacheRead    string `json:"cache_read"`
	CacheWrite   string `json:"cache_write"`
	CacheWrite1h string `json:"cache_write_1h"`
	Reasoning    string `json:"reasoning"`
}

func toFileRates(r Rates) fileRates {
	return fileRates{r.Input.String(), r.Output.String(), r.CacheRead.String(), r.CacheWrite.String(), r.CacheWrite1h.String(), r.Reasoning.String()}
}

// MarshalJSON writes the catalog as a catalog file, in canonical order and
// with every rate given, so that Parse reads it back to a catalog of the
// same Version (the form to store or to show with `aggregator prices`).
func (c *Catalog) MarshalJSON() ([]byte, error) {
	out := struct {
		Entries []fileEntry `json:"entries"`
	}{Entries: make([]fileEntry, 0, len(c.entries))}
	for _, e := range c.entries {
		fe := fileEntry{
			Provider: e.Provider, Model: e.Model, ServiceTier: e.ServiceTier,
			EffectiveFrom: e.EffectiveFrom.Format(time.DateOnly),
			fileRates:     toFileRates(e.Rates),
			Source:        e.Source, ReadOn: e.ReadOn.Format(time.DateOnly), Note: e.Note,
		}
		for _, t := range e.Tiers {
			fe.Tiers = append(fe.Tiers, fileTier{t.AboveInputTokens, toFileRates(t.Rates)})
		}
		out.Entries = append(out.Entries, fe)
	}
	return json.MarshalIndent(out, "", "  ")
}
