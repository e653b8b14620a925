package bucket

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		p  Policy
		ok bool
	}{
		{Policy{Capacity: 1, Rate: 0}, true},
		{Policy{Capacity: MaxCapacity, Rate: MaxRate}, true},
		{Policy{Capacity: 0, Rate: Scale}, false},
		{Policy{Capacity: -1, Rate: Scale}, false},
		{Policy{Capacity: MaxCapacity + 1, Rate: Scale}, false},
		{Policy{Capacity: 5, Rate: -1}, false},
		{Policy{Capacity: 5, Rate: MaxRate + 1}, false},
		{Policy{}, false},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		if tt.ok {
			assert.NoError(t, err, "%+v.Validate()", tt.p)
		} else {
			assert.ErrorIs(t, err, ErrInvalidPolicy, "%+v.Validate()", tt.p)
		}
	}
}

func TestParseRate(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1": Scale, "0.5": Scale / 2, "2.25": 2250_000_000, "1e3": 1000 * Scale,
		"0.000000001": 1, "1000000000": MaxRate, "1.0": Scale, "2.5E-1": Scale / 4,
	}
	for in, want := range good {
		got, err := ParseRate(in)
		require.NoError(t, err, "ParseRate(%q)", in)
		assert.Equal(t, want, got, "ParseRate(%q)", in)
	}
	for _, in := range []string{"-1", "-0.5", "0.0000000001", "1000000000.5", "1e10", "NaN", "Inf", "+Inf", "1/3", "0x10", "", " 1", "1.", ".5", "abc"} {
		_, err := ParseRate(in)
		assert.ErrorIs(t, err, ErrInvalidPolicy, "ParseRate(%q)", in)
	}
}

// The plain decimals FormatRate writes take a path of their own, which
// must agree with the exact parser and allocate nothing.
func TestParseRatePlainDecimals(t *testing.T) {
	for _, in := range []string{"0", "1", "0.5", "2.25", "0.000000001", "1000000000", "999999999.999999999", "10", "7.000000001"} {
		plain, ok := parsePlainRate(in)
		require.True(t, ok, "%q is plain", in)
		exact, err := parseRateExact(in)
		require.NoError(t, err, in)
		assert.Equal(t, exact, plain, "ParseRate(%q)", in)
		assert.Equal(t, in, FormatRate(plain), "FormatRate(ParseRate(%q))", in)
		assert.Zero(t, testing.AllocsPerRun(10, func() { _, _ = ParseRate(in) }), "ParseRate(%q) allocates", in)
	}
	for _, in := range []string{"1e3", "2.5E-1", "-1", "01", "00", "1.", ".5", "0.0000000001", "0.1000000000", "1000000000.5", "10000000000", "1 ", "1.x", "x"} {
		_, ok := parsePlainRate(in)
		assert.False(t, ok, "%q is left to the exact parser", in)
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"0", "1", "0.5", "1e3", "1000000000", "1000000000.5", "0.000000001", "-0", "01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		plain, ok := parsePlainRate(s)
		if !ok {
			return
		}
		exact, err := parseRateExact(s)
		require.NoError(t, err, "%q", s)
		require.Equal(t, exact, plain, "%q", s)
	})
}

func TestParseCapacity(t *testing.T) {
	good := map[string]int64{"1": 1, "5": 5, "1e3": 1000, "10.0": 10, "1000000000": MaxCapacity}
	for in, want := range good {
		got, err := ParseCapacity(in)
		require.NoError(t, err, "ParseCapacity(%q)", in)
		assert.Equal(t, want, got, "ParseCapacity(%q)", in)
	}
	for _, in := range []string{"0", "-3", "0.5", "1.5", "1000000001", "1e100", "NaN", "Infinity", "1/2", ""} {
		_, err := ParseCapacity(in)
		assert.ErrorIs(t, err, ErrInvalidPolicy, "ParseCapacity(%q)", in)
	}
}

func TestFormatRate(t *testing.T) {
	for rate, want := range map[int64]string{0: "0", Scale: "1", Scale / 2: "0.5", 1: "0.000000001", 2250_000_000: "2.25"} {
		assert.Equal(t, want, FormatRate(rate))
	}
}

func TestValidateTierName(t *testing.T) {
	for _, ok := range []string{"free", "pro", "enterprise", "tier-2", "a.b_c", "0"} {
		assert.NoError(t, ValidateTierName(ok), ok)
	}
	long := make([]byte, MaxTierNameLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", "default", "Free", "-x", "a b", "x/y", string(long), "é"} {
		assert.ErrorIs(t, ValidateTierName(bad), ErrInvalidTierName, bad)
	}
}

func TestConfigChangesBumpVersionAndCopy(t *testing.T) {
	c, err := NewConfig(BuiltinDefault)
	require.NoError(t, err)
	c1, err := c.WithTier("free", Policy{Capacity: 5, Rate: Scale}, Keep)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), c1.Version)
	assert.Empty(t, c.Tiers, "the original must not change")

	_, err = c1.WithTier("free", Policy{Capacity: 0}, Keep)
	assert.ErrorIs(t, err, ErrInvalidPolicy)
	_, err = c1.WithDefault(Policy{Capacity: 0}, Keep)
	assert.ErrorIs(t, err, ErrInvalidPolicy)

	c2, ok := c1.WithoutTier("free")
	require.True(t, ok)
	assert.Equal(t, uint64(2), c2.Version)
	_, ok = c2.WithoutTier("free")
	assert.False(t, ok)

	_, err = NewConfig(Policy{Capacity: 0, Rate: 1})
	assert.ErrorIs(t, err, ErrInvalidPolicy, "a node must refuse an invalid default")
}

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy("5", "0.25")
	require.NoError(t, err)
	assert.Equal(t, Policy{Capacity: 5, Rate: Scale / 4}, p)
	for _, tt := range []struct{ capacity, rate, field string }{
		{"", "1", "capacity is required"},
		{"5", "", "refill_per_second is required"},
		{"0", "1", "capacity must be at least 1"},
		{"1.5", "1", "capacity must be a whole number"},
		{"5", "-1", "refill_per_second must not be negative"},
		{"5", "0.0000000001", "more than 9 decimal places"},
		{"5", "one", "is not a number"},
	} {
		_, err := ParsePolicy(tt.capacity, tt.rate)
		assert.ErrorIs(t, err, ErrInvalidPolicy, "%q %q", tt.capacity, tt.rate)
		assert.ErrorContains(t, err, tt.field)
	}
}
