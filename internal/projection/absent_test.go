package projection

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAbsentFilterHasNoFalseNegatives(t *testing.T) {
	f := newAbsentFilter(10_001)
	for i := 0; i < 10_000; i++ {
		f.add(fmt.Sprint("k", i))
	}
	for i := 0; i < 10_000; i++ {
		require.False(t, f.absent(fmt.Sprint("k", i)), "a written key must never be reported absent")
	}
	fp := 0
	for i := 0; i < 10_000; i++ {
		if !f.absent(fmt.Sprint("other", i)) {
			fp++
		}
	}
	require.Less(t, fp, 300, "false-positive rate far above 1 %")
	f.add("one-more") // over capacity: every key must be read
	require.False(t, f.absent("never-written"))
}
