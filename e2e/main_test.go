package e2e

import (
	"io"
	"log"
	"os"
	"testing"
)

// TestMain silences the standard logger, through which genai reports every
// stream that fails, as the broken ones here do on purpose.
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}
