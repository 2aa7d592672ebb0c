package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"knode/internal/sim"
	"knode/internal/sim/script"
	"knode/internal/sim/timeline"
)

func newSimCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate nodes: scenarios in virtual time, or a fleet of agents against a live server",
	}
	cmd.AddCommand(newSimRunCommand(), newSimFleetCommand())
	return cmd
}

func newSimRunCommand() *cobra.Command {
	var out, cpuProfile string
	var seed uint64
	var workers int
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Replay a scenario script in virtual time and write its timeline",
		Long: `Replay a scenario script in virtual time with knode's real API server,
node lifecycle controller, taint eviction, scheduler, PV binder,
attach/detach controller, pod garbage collector, StatefulSet controller
and agents, and write DIR/timeline.csv and
DIR/timeline.svg. The same script and seed always give the same timeline.
See examples/sim for scripts and the README for the language.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			if workers < 0 {
				return fmt.Errorf("--workers=%d: must be 0 or more", workers)
			}
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			sc, err := script.Parse(args[0], f)
			f.Close()
			if err != nil {
				return err
			}
			// The simulator allocates much and lives briefly: trade memory
			// for fewer collections.
			debug.SetGCPercent(400)
			if cpuProfile != "" {
				pf, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pf.Close()
				defer pprof.StopCPUProfile()
			}
			start := time.Now()
			w, err := sim.Run(cmd.Context(), sc, sim.Config{Seed: seed, Workers: workers})
			if err != nil {
				return err
			}
			defer w.Close()
			wall := time.Since(start)
			if err := writeTimeline(out, filepath.Base(args[0]), w.Samples()); err != nil {
				return err
			}
			stdout := cmd.OutOrStdout()
			fmt.Fprintf(stdout, "%s: %v of virtual time in %.1fs (seed %d)\n", args[0], w.Now(), wall.Seconds(), seed)
			if err := sim.WriteSummary(stdout, w.Summary()); err != nil {
				return err
			}
			if err := sim.WriteStatefulSets(stdout, w.StatefulSets()); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(out, "timeline.csv"), filepath.Join(out, "timeline.svg"))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write timeline.csv and timeline.svg to (created if missing)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of every random choice")
	cmd.Flags().IntVar(&workers, "workers", 0, "goroutines that run the agents' callbacks due together (0: one per CPU); the timeline does not depend on it")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	return cmd
}

// writeTimeline writes DIR/timeline.csv and DIR/timeline.svg.
func writeTimeline(dir, title string, rows []timeline.Row) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var csv, svg bytes.Buffer
	if err := timeline.WriteCSV(&csv, rows); err != nil {
		return err
	}
	if err := timeline.WriteSVG(&svg, rows, title); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "timeline.csv"), csv.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "timeline.svg"), svg.Bytes(), 0o644)
}
