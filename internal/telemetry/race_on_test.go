//go:build race

package telemetry_test

// raceDetector reports whether the test binary was built with -race, under
// which allocation counts are not exact.
const raceDetector = true
