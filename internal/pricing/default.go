package pricing

import (
	_ "embed"
	"sync"
)

//go:embed catalog.json
var defaultFile []byte

var defaultCatalog = sync.OnceValue(func() *Catalog {
	c, err := Parse(defaultFile)
	if err != nil {
		panic("pricing: the embedded catalog.json is invalid: " + err.Error())
	}
	return c
})

// Default returns the shipped catalog, parsed from the embedded
// catalog.json: each entry names its source and the day it was read.
func Default() *Catalog { return defaultCatalog() }

// DefaultFile returns the bytes of the shipped catalog file.
func DefaultFile() []byte { return append([]byte(nil), defaultFile...) }
