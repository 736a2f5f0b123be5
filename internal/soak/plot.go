package soak

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// panel is one chart of the figure: a y axis and the columns on it.
type panel struct {
	title, unit string
	columns     []string
	labels      []string
}

// Plot draws the series as a PNG of five charts over elapsed minutes:
// resident memory of the doclog roles and the load generator, that of the
// servers (Postgres, Kafka) on a scale of their own, CPU cores per
// process, p50/p99 to READ_READY, and the consumer lag of the executor and
// the projectors.
func Plot(s *Series, title string, w io.Writer) error {
	var roles, servers, cpu, roleNames, serverNames, names []string
	for _, p := range s.Processes() {
		if p == "postgres" || p == "kafka" {
			servers, serverNames = append(servers, "rss_mib_"+p), append(serverNames, p)
		} else {
			roles, roleNames = append(roles, "rss_mib_"+p), append(roleNames, p)
		}
		cpu, names = append(cpu, "cpu_cores_"+p), append(names, p)
	}
	panels := []panel{
		{"Resident memory", "MiB", roles, roleNames},
		{"Resident memory of the servers", "MiB", servers, serverNames},
		{"CPU", "cores", cpu, names},
		{"Latency to READ_READY", "ms", []string{"read_ready_p50_ms", "read_ready_p99_ms"}, []string{"p50", "p99"}},
		{"Consumer lag", "records", []string{"executor_lag_records", "projector_lag_records"}, []string{"executor", "projector (furthest behind)"}},
	}
	plots := make([][]*plot.Plot, len(panels))
	minutes := make([]float64, s.Len())
	for i, e := range s.Columns["elapsed_s"] {
		minutes[i] = e / 60
	}
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		if i == 0 && title != "" {
			p.Title.Text = title + ": " + strings.ToLower(pn.title[:1]) + pn.title[1:]
		}
		p.X.Label.Text = "elapsed (min)"
		p.Y.Label.Text = pn.unit
		p.Y.Min = 0
		if len(minutes) > 0 {
			p.X.Min, p.X.Max = 0, minutes[len(minutes)-1]
		}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		for j, col := range pn.columns {
			pts := points(minutes, s.Columns[col])
			if len(pts) == 0 {
				continue
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return fmt.Errorf("plotting %s: %w", col, err)
			}
			line.Color = palette[j%len(palette)]
			line.Width = vg.Points(1.2)
			p.Add(line)
			p.Legend.Add(pn.labels[j], line)
		}
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.New(vg.Points(720), vg.Points(1150))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(10), PadY: vg.Points(14)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("writing the plot: %w", err)
	}
	return nil
}

// palette is Okabe and Ito's eight colours, told apart with most kinds of
// colour blindness; the process columns are fewer.
var palette = []color.Color{
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, color.RGBA{0x00, 0x72, 0xb2, 0xff}, color.RGBA{0x00, 0x9e, 0x73, 0xff},
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, color.RGBA{0xe6, 0x9f, 0x00, 0xff}, color.RGBA{0x56, 0xb4, 0xe9, 0xff},
	color.RGBA{0x00, 0x00, 0x00, 0xff}, color.RGBA{0xf0, 0xe4, 0x42, 0xff},
}

// points pairs x with the values of y that are not NaN: a gap in the
// series is drawn as a straight segment across it.
func points(x, y []float64) plotter.XYs {
	var pts plotter.XYs
	for i := range y {
		if !math.IsNaN(y[i]) && !math.IsInf(y[i], 0) {
			pts = append(pts, plotter.XY{X: x[i], Y: y[i]})
		}
	}
	return pts
}
