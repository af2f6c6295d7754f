package pricing

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Money is an amount in nano-US-dollars (1e-9 USD). It is exact: every
// price of the catalog times every token count is computed in integers and
// rounded once per attempt (see Price).
type Money int64

// Rate is a price in nano-US-dollars per million tokens, which is also
// 1e-15 USD per token. Any price quoted to 1e-9 $/Mtok is exact: "3.00"
// $/Mtok is Rate 3_000_000_000 and "0.075" is 75_000_000.
type Rate int64

// perMillion is the divisor from tokens x Rate (1e-15 USD) to Money
// (1e-9 USD).
const perMillion = 1_000_000

// maxRateDigits is the largest number of digits before the point of a
// price: 999,999,999.999999999 $/Mtok is Rate 999,999,999,999,999,999,
// within int64.
const maxRateDigits = 9

// ParseRate reads a price in US dollars per million tokens written as a
// decimal string: digits, optionally a point and 1 to 9 more digits ("3",
// "3.00", "0.075", "0.000000001"). No sign, exponent, spaces or
// separators: there is no float anywhere on the way, so the Rate is exact.
func ParseRate(s string) (Rate, error) {
	whole, frac, dot := strings.Cut(s, ".")
	switch {
	case s == "":
		return 0, fmt.Errorf("empty; want a decimal string of US dollars per million tokens, e.g. \"3.00\"")
	case whole == "":
		return 0, fmt.Errorf("%q has no digit before the point; write \"0%s\"", s, s)
	case dot && frac == "":
		return 0, fmt.Errorf("%q has no digit after the point", s)
	case !allDigits(whole) || !allDigits(frac):
		return 0, fmt.Errorf("%q is not a decimal of US dollars per million tokens (digits and one point only: no sign, exponent or separator)", s)
	case len(frac) > 9:
		return 0, fmt.Errorf("%q has %d decimals; a price has at most 9 (1e-9 $ per million tokens, the Rate's unit)", s, len(frac))
	case len(strings.TrimLeft(whole, "0")) > maxRateDigits:
		return 0, fmt.Errorf("%q is too large; a price is below 1,000,000,000 $ per million tokens", s)
	}
	w, _ := strconv.ParseInt(whole, 10, 64) // checked: at most 9 significant digits
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	return Rate(w*1_000_000_000 + f), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String writes r in US dollars per million tokens, with at least two
// decimals and no trailing zero beyond them ("3.00", "0.075"); ParseRate
// reads it back to r.
func (r Rate) String() string { return decimal(int64(r)) }

// String writes m in US dollars, with at least two decimals and no
// trailing zero beyond them ("0.00", "1.234567891", "-0.05").
func (m Money) String() string { return decimal(int64(m)) }

// decimal writes v / 1e9 with 2 to 9 decimals.
func decimal(v int64) string {
	sign := ""
	u := uint64(v)
	if v < 0 {
		sign, u = "-", uint64(-(v+1))+1 // no overflow at MinInt64
	}
	frac := fmt.Sprintf("%09d", u%1_000_000_000)
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return sign + strconv.FormatUint(u/1_000_000_000, 10) + "." + frac
}

// u128 is an unsigned 128-bit integer: an amount in 1e-15 USD (tokens x
// Rate) before the one rounding to Money.
type u128 struct{ hi, lo uint64 }

// mulTokens returns tokens x r in 1e-15 USD. Negative counts and rates
// count as 0 (Parse refuses negative rates; the contract negative tokens).
func mulTokens(tokens int64, r Rate) u128 {
	if tokens <= 0 || r <= 0 {
		return u128{}
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(r))
	return u128{hi, lo}
}

// add returns a+b; it saturates at 2^128-1, which no sum of five products
// of int64 values reaches.
func (a u128) add(b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, c2 := bits.Add64(a.hi, b.hi, c)
	if c2 != 0 {
		return u128{math.MaxUint64, math.MaxUint64}
	}
	return u128{hi, lo}
}

// toMoney divides a (1e-15 USD) by 1e6 and rounds half to even to Money
// (1e-9 USD), saturating at the largest Money.
func (a u128) toMoney() Money {
	if a.hi >= perMillion { // the quotient would not fit 64 bits
		return math.MaxInt64
	}
	q, r := bits.Div64(a.hi, a.lo, perMillion)
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	if r > perMillion/2 || (r == perMillion/2 && q&1 == 1) {
		q++
	}
	return Money(q)
}
