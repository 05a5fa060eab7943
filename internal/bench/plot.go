package bench

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Plot file names written by WritePlots.
const (
	DAALPlotFile    = "daal.png"
	LatencyPlotFile = "daal-latency.png"
)

var (
	gcOnColor  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	gcOffColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	dashes     = []vg.Length{vg.Points(5), vg.Points(3)}
)

type line struct {
	name   string
	xy     plotter.XYs
	color  color.Color
	dashed bool
}

// WritePlots writes the DAAL length over time (DAALPlotFile) and the write latency over time
// (LatencyPlotFile: median of the write and of the whole request, Beldi Fig. 16) as PNG images
// into dir.
func (r *DAALReport) WritePlots(dir string) error {
	var rows, lat []line
	for _, run := range r.Runs {
		c := gcOffColor
		if run.GC {
			c = gcOnColor
		}
		var reach, stored, write, req plotter.XYs
		for _, p := range run.Points {
			reach = append(reach, plotter.XY{X: p.Seconds, Y: float64(p.Reachable)})
			stored = append(stored, plotter.XY{X: p.Seconds, Y: float64(p.Stored)})
			if p.Writes > 0 {
				write = append(write, plotter.XY{X: p.Seconds, Y: p.WriteMedianUS / 1000})
				req = append(req, plotter.XY{X: p.Seconds, Y: p.RequestMedianUS / 1000})
			}
		}
		gc := "GC " + onOff(run.GC)
		rows = append(rows, line{gc + ": reachable rows", reach, c, false}, line{gc + ": stored rows", stored, c, true})
		lat = append(lat, line{gc + ": write", write, c, false}, line{gc + ": whole request", req, c, true})
	}
	sub := fmt.Sprintf("RowCapacity %d, T %s, GC every %s", r.RowCapacity, r.GCBound, r.GCEvery)
	if err := linePlot(filepath.Join(dir, DAALPlotFile), "Linked DAAL length, every instance writing one key ("+sub+")", "rows", rows); err != nil {
		return err
	}
	return linePlot(filepath.Join(dir, LatencyPlotFile), "Median latency per "+r.Sample+" interval, instances doing one exactly-once write ("+sub+")", "ms", lat)
}

// plainTicks are gonum's default ticks labelled without trailing zeros ("750", not "750.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

func linePlot(path, title, yLabel string, lines []line) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(8)
	for _, l := range lines {
		if len(l.xy) == 0 {
			continue
		}
		lp, err := plotter.NewLine(l.xy)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		lp.Color, lp.Width = l.color, vg.Points(1.5)
		if l.dashed {
			lp.Dashes = dashes
		}
		p.Add(lp)
		p.Legend.Add(l.name, lp)
	}
	if err := p.Save(9*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// newBarPlot starts a bar chart: bars from 0, a grid, the legend top left.
func newBarPlot(title, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Y.Tick.Marker = plainTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	return p
}

// addBars adds series i of n to a grouped bar chart: bars of width, side by side with the other
// series at each category, in the series' color, with a legend entry.
func addBars(p *plot.Plot, i, n int, width vg.Length, name string, vals plotter.Values) error {
	bars, err := plotter.NewBarChart(vals, width)
	if err != nil {
		return err
	}
	bars.Color = barColors[i%len(barColors)]
	bars.LineStyle.Width = 0
	bars.Offset = width * vg.Length(float64(i)-float64(n-1)/2)
	p.Add(bars)
	p.Legend.Add(name, bars)
	return nil
}
