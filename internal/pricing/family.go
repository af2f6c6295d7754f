package pricing

import "strings"

// Family returns the model family of a model ID, the name the catalog
// prices it under: the ID without the date or version of a snapshot.
// An ID that is already a family is returned as it is; Family never
// allocates.
//
//   - anthropic: claude-sonnet-4-5-20250929 and claude-sonnet-4-5@20250929
//     (Vertex AI) -> claude-sonnet-4-5; a trailing -latest is dropped.
//   - openai: gpt-4.1-2025-04-14 -> gpt-4.1, gpt-4-0613 -> gpt-4 (the
//     older -MMDD snapshots); a trailing -latest is dropped.
//   - gemini: a leading models/ is dropped; gemini-2.5-flash-001,
//     gemini-2.5-flash-preview-05-20, gemini-2.5-flash-preview-09-2025,
//     gemini-2.5-flash-exp-0827, gemini-2.5-flash-preview and
//     gemini-2.5-flash-latest -> gemini-2.5-flash.
//   - mistral: mistral-large-2411 and mistral-large-latest -> mistral-large.
//   - any provider: a trailing -YYYY-MM-DD, -YYYYMMDD or -latest is dropped.
func Family(provider, model string) string {
	m := model
	switch strings.ToLower(provider) {
	case "anthropic":
		if i := strings.LastIndexByte(m, '@'); i > 0 && isDate8(m[i+1:]) {
			m = m[:i]
		}
		m = trimGeneric(m)
	case "openai":
		m = trimGeneric(m)
		if i := strings.LastIndexByte(m, '-'); i > 0 && isMMDD(m[i+1:]) {
			m = m[:i]
		}
	case "gemini":
		m = strings.TrimPrefix(m, "models/")
		m = trimGemini(m)
	case "mistral":
		m = trimGeneric(m)
		if i := strings.LastIndexByte(m, '-'); i > 0 && isYYMM(m[i+1:]) {
			m = m[:i]
		}
	default:
		m = trimGeneric(m)
	}
	return m
}

// trimGeneric drops one trailing -latest, -YYYY-MM-DD or -YYYYMMDD.
func trimGeneric(m string) string {
	if s, ok := strings.CutSuffix(m, "-latest"); ok && s != "" {
		return s
	}
	if n := len(m); n > 11 && m[n-11] == '-' && isDashedDate(m[n-10:]) {
		return m[:n-11]
	}
	if i := strings.LastIndexByte(m, '-'); i > 0 && isDate8(m[i+1:]) {
		return m[:i]
	}
	return m
}

// trimGemini drops Gemini's version suffixes, outermost first: -latest,
// -NNN (a stable version), -preview or -exp with the date that may
// follow them (-MM-DD, -MM-YYYY, -MMDD).
func trimGemini(m string) string {
	if s, ok := strings.CutSuffix(m, "-latest"); ok && s != "" {
		m = s
	}
	if i := strings.LastIndexByte(m, '-'); i > 0 && len(m)-i == 4 && allDigits(m[i+1:]) {
		m = m[:i]
	}
	for _, tag := range []string{"-preview", "-exp"} {
		i := strings.LastIndex(m, tag)
		if i <= 0 {
			continue
		}
		if rest := m[i+len(tag):]; rest == "" || isGeminiDate(rest) {
			return m[:i]
		}
	}
	return m
}

// isGeminiDate reports whether s is "-MM-DD", "-MM-YYYY" or "-MMDD".
func isGeminiDate(s string) bool {
	switch {
	case len(s) == 6 && s[0] == '-' && s[3] == '-':
		return isMonth(s[1:3]) && isDay(s[4:6])
	case len(s) == 8 && s[0] == '-' && s[3] == '-':
		return isMonth(s[1:3]) && allDigits(s[4:8])
	case len(s) == 5 && s[0] == '-':
		return isMMDD(s[1:])
	}
	return false
}

// isDashedDate reports whether s is YYYY-MM-DD.
func isDashedDate(s string) bool {
	return len(s) == 10 && s[4] == '-' && s[7] == '-' && allDigits(s[:4]) && isMonth(s[5:7]) && isDay(s[8:10])
}

// isDate8 reports whether s is YYYYMMDD.
func isDate8(s string) bool {
	return len(s) == 8 && allDigits(s[:4]) && isMonth(s[4:6]) && isDay(s[6:8])
}

// isMMDD reports whether s is MMDD (OpenAI's gpt-4-0613).
func isMMDD(s string) bool { return len(s) == 4 && isMonth(s[:2]) && isDay(s[2:]) }

// isYYMM reports whether s is YYMM from 2023 on (Mistral's -2411).
func isYYMM(s string) bool {
	return len(s) == 4 && allDigits(s[:2]) && s[:2] >= "23" && isMonth(s[2:])
}

func isMonth(s string) bool { return len(s) == 2 && allDigits(s) && s >= "01" && s <= "12" }
func isDay(s string) bool   { return len(s) == 2 && allDigits(s) && s >= "01" && s <= "31" }
