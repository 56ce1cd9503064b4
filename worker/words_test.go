package worker_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoExampleWords: the loop and its option packages name no word of the
// order example in their non-test files: the names a deployment reads (log
// keys, metric and attribute names) are set by the caller.
func TestNoExampleWords(t *testing.T) {
	words := []string{`"order_id"`, `"/orderId"`, `orderworker`, `"order.`, `TakenOver`, `taken_over`}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, w := range words {
			if strings.Contains(string(src), w) {
				t.Errorf("%s holds %s", path, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
