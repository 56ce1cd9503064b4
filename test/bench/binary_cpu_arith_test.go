package bench_test

import (
	"slices"
	"testing"
	"time"
)

// TestBinaryCPUArithmetic checks the arithmetic BenchmarkBinaryCPU reports
// with: the order of the phases, the spread of a consumer's phases, the
// ratios of adjacent phases and a window's figures per message.
func TestBinaryCPUArithmetic(t *testing.T) {
	t.Run("alternation", func(t *testing.T) {
		for _, tt := range []struct {
			k, rounds int
			want      [][]int
		}{
			{2, 5, [][]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}, {0, 1}}},
			{3, 2, [][]int{{0, 1, 2}, {2, 1, 0}}},
			{1, 2, [][]int{{0}, {0}}},
		} {
			if got := alternation(tt.k, tt.rounds); !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("alternation(%d, %d) = %v, want %v", tt.k, tt.rounds, got, tt.want)
			}
		}
	})
	t.Run("spread", func(t *testing.T) {
		for _, tt := range []struct {
			xs   []float64
			want spread
		}{
			{[]float64{5, 1, 3}, spread{3, 1, 5}},
			{[]float64{4, 1, 3, 10}, spread{3.5, 1, 10}},
			{[]float64{7}, spread{7, 7, 7}},
			{nil, spread{}},
		} {
			in := slices.Clone(tt.xs)
			if got := spreadOf(tt.xs); got != tt.want {
				t.Errorf("spreadOf(%v) = %+v, want %+v", in, got, tt.want)
			}
			if !slices.Equal(tt.xs, in) {
				t.Errorf("spreadOf reordered its argument: %v, was %v", tt.xs, in)
			}
		}
	})
	t.Run("pairs", func(t *testing.T) {
		got := pairedRatios([]float64{120, 110, 300}, []float64{100, 0, 200, 50})
		if want := []float64{1.2, 1.5}; !slices.Equal(got, want) {
			t.Errorf("pairedRatios = %v, want %v (a bare phase of 0 is left out, an unpaired phase too)", got, want)
		}
	})
	t.Run("floor", func(t *testing.T) {
		ran := map[string][]binaryPhase{"bare": {{}}, "bare-deployed": {{}}}
		for _, tt := range []struct {
			v    binaryVariant
			want string
		}{
			{binaryVariant{name: "worker"}, "bare"},
			{binaryVariant{name: "worker-deployed", floor: "bare-deployed"}, "bare-deployed"},
			{binaryVariant{name: "deployed-gogc200", floor: "bare-gogc200"}, "bare"}, // its floor did not run
		} {
			if got := floorOf(tt.v, ran); got != tt.want {
				t.Errorf("floorOf(%s) = %s, want %s", tt.v.name, got, tt.want)
			}
		}
	})
	t.Run("window", func(t *testing.T) {
		p := binaryPhase{n: 2000, cpu: 500 * time.Millisecond, requests: 3000, allocN: 1990, allocs: 995000}
		if got := p.cpuPerMsg(); got != 250 {
			t.Errorf("cpuPerMsg = %v µs, want 250 (500 ms over 2000 completions)", got)
		}
		if got := p.rtPerMsg(); got != 1.5 {
			t.Errorf("rtPerMsg = %v, want 1.5", got)
		}
		if got := p.allocsPerMsg(); got != 500 {
			t.Errorf("allocsPerMsg = %v, want 500 (over the probe's own 1990 completions)", got)
		}
		if got := (binaryPhase{}).cpuPerMsg(); got != 0 {
			t.Errorf("an empty window's cpuPerMsg = %v, want 0", got)
		}
	})
}
