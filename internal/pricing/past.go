package pricing

import (
	"embed"
	"fmt"
	"io/fs"
	"sync"
)

// The default catalogs of earlier builds, as they shipped (past/, one
// file per build that changed catalog.json, named for its commit). A
// ledger records the version it prices with; builds before resolved
// catalogs were stored in ledger_prices (package pricebook) stored only
// the user's file, or nothing for their default alone, so a later build
// needs their default to rebuild that version. The list is closed:
// builds since then store the resolved catalog, which any build reads.
//
//go:embed past/*.json
var pastFS embed.FS

var pastDefaults = sync.OnceValue(func() []*Catalog {
	files, err := fs.Glob(pastFS, "past/*.json")
	if err != nil {
		panic("pricing: " + err.Error())
	}
	out := make([]*Catalog, 0, len(files))
	for _, f := range files {
		data, err := pastFS.ReadFile(f)
		if err != nil {
			panic("pricing: " + err.Error())
		}
		c, err := Parse(data)
		if err != nil {
			panic(fmt.Sprintf("pricing: the embedded %s is invalid: %v", f, err))
		}
		out = append(out, c)
	}
	return out
})

// PastDefaults returns the default catalogs of the builds that did not
// store their resolved catalogs (before issue 19's pricebook kept them),
// oldest first. The slice is shared: do not modify it.
func PastDefaults() []*Catalog { return pastDefaults() }
