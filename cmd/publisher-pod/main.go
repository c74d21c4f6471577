// Command publisher-pod is a runnable sample producer: it publishes --count
// records to a sharded stream through package producer and writes one JSON
// line per published record to --published-log, so an end-to-end test can
// compare what was published with what Redis holds and what consumers saw.
//
//	publisher-pod --coordinator http://127.0.0.1:8080 --redis 127.0.0.1:6379 \
//	    --stream orders --count 10000 --rate 500 --batch 50 --published-log pub.jsonl
//
// Every record has the fields eventId ("{pod}-{seq}", unique), partitionKey
// ("key-{seq mod key-space}") and seq. A record that fails is retried with
// backoff for --retry-timeout (a retried XADD whose first answer was lost may
// write the record twice: the eventId tells the copies apart); a record that
// still fails is logged and makes the exit code 1.
//
// Exit codes: 0 every record was published, or SIGINT/SIGTERM stopped the
// pod cleanly (the log is flushed first); 1 a record or the start failed;
// 2 the command line does not parse.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitRequest carries kong's exit code (after --help) out of the parser:
// kong.Exit must not end the process when run is called by tests.
type exitRequest struct{ code int }

// run parses args, publishes and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("publisher-pod"),
		kong.Description("Sample producer: publishes records to a sharded Redis stream routed by the rscoord coordinator."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitRequest{code}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Vars{"pod": defaultPod()},
	)
	if err != nil {
		fmt.Fprintf(stderr, "publisher-pod: build command line: %v\n", err)
		return exitError
	}
	defer func() {
		if r := recover(); r != nil {
			req, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			code = req.code
		}
	}()
	if _, err := parser.Parse(args); err != nil {
		fmt.Fprintf(stderr, "publisher-pod: %v (see publisher-pod --help)\n", err)
		return exitUsage
	}
	if err := cli.validate(); err != nil {
		fmt.Fprintf(stderr, "publisher-pod: %v (see publisher-pod --help)\n", err)
		return exitUsage
	}
	log := cli.logger(stderr)
	sum, err := publish(ctx, &cli, log)
	if err != nil {
		// The error first: a "done" line above it would read as success.
		fmt.Fprintf(stderr, "publisher-pod: %v\n", err)
	}
	log.Info("publisher-pod done", "published", sum.published, "failed", sum.failed,
		"requested", cli.Count, "interrupted", sum.interrupted, "elapsed", sum.elapsed.String())
	if err != nil {
		return exitError
	}
	if sum.failed > 0 {
		fmt.Fprintf(stderr, "publisher-pod: %d of %d records failed\n", sum.failed, cli.Count)
		return exitError
	}
	return exitOK
}

// defaultPod is the default of --pod: $POD_NAME, else the host name.
func defaultPod() string {
	if p := os.Getenv("POD_NAME"); p != "" {
		return p
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "publisher"
}

// errStartRefused is a start failure retrying will not fix.
var errStartRefused = errors.New("coordinator refused the producer")

// logger writes to stderr in the chosen format.
func (c *CLI) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
