package bench

import (
	"bufio"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Summary describes a set of latencies. Times are in microseconds.
type Summary struct {
	N         int     `json:"n"`
	MedianUS  float64 `json:"median_us"`
	P99US     float64 `json:"p99_us"`
	MeanUS    float64 `json:"mean_us"`
	OpsPerSec float64 `json:"ops_per_sec"` // one caller, back to back: 1 / mean
}

// Summarize computes median and p99 (nearest rank) and the mean of samples.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var total time.Duration
	for _, d := range s {
		total += d
	}
	mean := total / time.Duration(len(s))
	sum := Summary{N: len(s), MedianUS: us(quantile(s, 0.50)), P99US: us(quantile(s, 0.99)), MeanUS: us(mean)}
	if mean > 0 {
		sum.OpsPerSec = float64(time.Second) / float64(mean)
	}
	return sum
}

// quantile returns the nearest-rank q-quantile of sorted samples.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Machine describes where a benchmark ran.
type Machine struct {
	CPU   string `json:"cpu,omitempty"`
	Cores int    `json:"cores"`
	OS    string `json:"os"`
	Arch  string `json:"arch"`
	Go    string `json:"go"`
	// Load is the load average when the benchmark started: other work on the machine skews it.
	Load string `json:"load,omitempty"`
}

func thisMachine() Machine {
	m := Machine{CPU: cpuModel(), Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	return m
}

func (m Machine) String() string {
	s := m.OS + "/" + m.Arch + ", " + plural(m.Cores, "core") + ", " + m.Go
	if m.CPU != "" {
		s = m.CPU + ", " + s
	}
	if m.Load != "" {
		s += ", load average " + m.Load + " at start"
	}
	return s
}

// cpuModel reads the CPU model on Linux; elsewhere it is left out.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
