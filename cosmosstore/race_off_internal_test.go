//go:build !race

package cosmosstore

// raceDetector reports whether the test binary was built with -race, under
// which sync.Pool drops some of what it is given and allocation counts are
// not exact.
const raceDetector = false
