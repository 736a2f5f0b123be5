// Command soakreport judges and draws the time series of a soak (`make
// soak`, docs/benchmarks.md): it reads the CSV `doclogctl bench --series`
// wrote, prints the verdict as a Markdown table, writes a PNG of memory,
// CPU, latency and lag over time, and exits 1 when a judged series is not
// flat or the executor's memory is over its limit.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/doclog/doclog/internal/soak"
)

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakreport:", err)
	}
	os.Exit(code)
}

func run(args []string) (int, error) {
	fs := flag.NewFlagSet("soakreport", flag.ContinueOnError)
	series := fs.String("series", "", "the CSV of doclogctl bench --series (required)")
	png := fs.String("png", "", "write the plot to this PNG file")
	title := fs.String("title", "Soak", "the plot's title")
	var o soak.Options
	fs.Float64Var(&o.Tolerance, "tolerance", soak.DefaultTolerance, "the largest relative change of a flat series")
	fs.DurationVar(&o.Warmup, "warmup", soak.DefaultWarmup, "left out at the start of the series")
	fs.Float64Var(&o.ExecutorRSSLimitMiB, "executor-rss-limit", soak.DefaultExecutorRSSLimitMiB, "the executor's largest resident memory, MiB")
	if err := fs.Parse(args); err != nil {
		return 2, nil // the flag package has said why
	}
	if *series == "" {
		return 2, fmt.Errorf("give --series FILE")
	}
	f, err := os.Open(*series)
	if err != nil {
		return 2, err
	}
	defer f.Close()
	s, err := soak.Read(f)
	if err != nil {
		return 2, err
	}
	if *png != "" {
		out, err := os.Create(*png)
		if err != nil {
			return 2, err
		}
		if err := soak.Plot(s, *title, out); err != nil {
			out.Close()
			return 2, err
		}
		if err := out.Close(); err != nil {
			return 2, fmt.Errorf("writing the plot: %w", err)
		}
	}
	v := soak.Judge(s, o)
	if err := v.Markdown(os.Stdout); err != nil {
		return 2, err
	}
	if !v.OK {
		return 1, nil
	}
	return 0, nil
}
