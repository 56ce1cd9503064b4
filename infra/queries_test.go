package infra_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNothingQueriesTheStore keeps the orders container's indexing policy
// honest: it indexes no path (infra/bicep/modules/cosmos.bicep), which is
// right only while no program queries the container. Every access is a
// point read by id and partition key, a create, replace or patch of one
// item, a transactional batch or the change feed, and none of those uses
// the index. A query in any non-test Go file of the module fails this test:
// index the paths it filters or sorts on, then update the list below.
//
// The files in unindexedQueries query without using the index, each for
// its reason.
func TestNothingQueriesTheStore(t *testing.T) {
	query := regexp.MustCompile(`\bNewQueryItemsPager\b|\bQueryItems\b|"SELECT\s`)
	var found []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".cache", "test":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if query.Match(b) && !unindexedQueries[filepath.ToSlash(path)] {
			found = append(found, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%v query Cosmos DB; the orders container indexes no path, so each query scans: index what they use (cosmos.bicep indexingPolicy) and update this test", found)
	}
}

// unindexedQueries are the files whose queries need no index.
var unindexedQueries = map[string]bool{
	// cosmosstore.ReadPartition, for orderctl audit: every document of one
	// logical partition (an order's few documents), filtered only on the
	// partition key it is sent with, with EnableScanInQuery; never on the
	// worker's path.
	"../cosmosstore/partition.go": true,
}
