package pricing

import (
	"strings"
	"testing"
)

func TestFamily(t *testing.T) {
	for _, tc := range []struct{ provider, model, want string }{
		{"anthropic", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"anthropic", "claude-sonnet-4-5@20250929", "claude-sonnet-4-5"},
		{"anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"anthropic", "claude-3-5-haiku-latest", "claude-3-5-haiku"},
		{"anthropic", "claude-3-5-haiku-20241022", "claude-3-5-haiku"},
		{"Anthropic", "claude-opus-4-1-20250805", "claude-opus-4-1"},
		{"openai", "gpt-4.1-2025-04-14", "gpt-4.1"},
		{"openai", "gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"},
		{"openai", "gpt-4o-2024-08-06", "gpt-4o"},
		{"openai", "o3-mini-2025-01-31", "o3-mini"},
		{"openai", "gpt-5-2025-08-07", "gpt-5"},
		{"openai", "gpt-4-0613", "gpt-4"},
		{"openai", "gpt-3.5-turbo-0125", "gpt-3.5-turbo"},
		{"openai", "gpt-4.1", "gpt-4.1"},
		{"openai", "gpt-oss-120b", "gpt-oss-120b"},
		{"openai", "gpt-4-1399", "gpt-4-1399"}, // not a month and day
		{"gemini", "gemini-2.5-flash-001", "gemini-2.5-flash"},
		{"gemini", "models/gemini-2.5-flash", "gemini-2.5-flash"},
		{"gemini", "gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"},
		{"gemini", "gemini-2.5-flash-preview-09-2025", "gemini-2.5-flash"},
		{"gemini", "gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"},
		{"gemini", "gemini-2.5-flash-lite", "gemini-2.5-flash-lite"},
		{"gemini", "gemini-3-pro-preview", "gemini-3-pro"},
		{"gemini", "gemini-1.5-pro-exp-0827", "gemini-1.5-pro"},
		{"gemini", "gemini-2.0-flash-latest", "gemini-2.0-flash"},
		{"gemini", "gemini-2.5-pro", "gemini-2.5-pro"},
		{"gemini", "gemini-2.5-pro-001", "gemini-2.5-pro"},
		{"gemini", "gemini-2.5-flash-lite-preview-09-2025", "gemini-2.5-flash-lite"},
		{"gemini", "gemini-3.1-pro-preview", "gemini-3.1-pro"},
		{"gemini", "gemini-3-flash-preview", "gemini-3-flash"},
		{"gemini", "models/gemini-3.5-flash", "gemini-3.5-flash"},
		{"openai", "gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"},
		{"openai", "gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"openai", "o4-mini-2025-04-16", "o4-mini"},
		{"mistral", "mistral-large-2411", "mistral-large"},
		{"mistral", "mistral-large-latest", "mistral-large"},
		{"mistral", "mistral-small-2503", "mistral-small"},
		{"mistral", "pixtral-12b-2409", "pixtral-12b"},
		{"mistral", "mistral-medium-1299", "mistral-medium-1299"},
		{"mistral", "ministral-8b-latest", "ministral-8b"},
		{"mistral", "devstral-small-2507", "devstral-small"},
		{"mistral", "magistral-medium-2509", "magistral-medium"},
		{"deepseek", "deepseek-chat", "deepseek-chat"},
		{"deepseek", "deepseek-v4-pro", "deepseek-v4-pro"},
		{"groq", "llama-3.3-70b-versatile", "llama-3.3-70b-versatile"},
		{"together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", "meta-llama/Llama-3.3-70B-Instruct-Turbo"},
		{"other", "some-model-2025-01-02", "some-model"},
		{"other", "some-model-20250102", "some-model"},
		{"other", "-latest", "-latest"},
		{"other", "", ""},
	} {
		if got := Family(tc.provider, tc.model); got != tc.want {
			t.Errorf("Family(%q, %q) = %q, want %q", tc.provider, tc.model, got, tc.want)
		}
	}
}

func TestFamilyDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		Family("gemini", "models/gemini-2.5-flash-preview-05-20")
		Family("anthropic", "claude-sonnet-4-5-20250929")
	})
	if allocs != 0 {
		t.Fatalf("Family allocates %v times per call", allocs)
	}
}

// TestDefaultEntriesAreFamilies: every entry of the shipped catalog is
// keyed by a family, so the dated, -NNN, -preview and -latest IDs of its
// model resolve to it (an entry keyed by a dated ID would price that
// snapshot only), and names the page it was read from and when.
func TestDefaultEntriesAreFamilies(t *testing.T) {
	for _, e := range Default().Entries() {
		if f := Family(e.Provider, e.Model); f != e.Model {
			t.Errorf("%s %s: Family gives %q, so no model ID resolves to the entry", e.Provider, e.Model, f)
		}
		if !strings.HasPrefix(e.Source, "https://") || e.ReadOn.IsZero() {
			t.Errorf("%s %s %q: source %q read on %v: want the page's https URL and the day it was read", e.Provider, e.Model, e.ServiceTier, e.Source, e.ReadOn)
		}
	}
}
