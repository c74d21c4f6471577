// Command rscoord is the rscoord shard coordinator for Redis Streams and its
// admin CLI.
//
//	rscoord serve                       run the coordinator
//	rscoord stream list|create|scale|rollback|migrations|complete|status
//	rscoord group list|create|get|delete|members|assignments
//	rscoord shards|offsets|messages     read shard streams through the coordinator
//	rscoord offsets reset GROUP --stream S --to-…  move a group's offsets (dry run by default)
//	rscoord audit                       page through the audit log
//	rscoord login|logout                keep a token for later commands
//	rscoord token create|list|revoke    long-lived API tokens for services
//	rscoord import-reference            take over the reference design's streams and groups
//	rscoord completion bash|zsh|fish    print a shell completion script
//	rscoord hash-password               bcrypt a password (no echo on a terminal)
//	rscoord version, rscoord --version
//	rscoord probe URL                   healthcheck: exit 0 on a 2xx answer
//
// The admin commands talk to a running coordinator over its HTTP API
// (/coord/v1, docs/protocol.md §5), with --user/--password or --token
// credentials. They print tables on stdout, or the JSON
// answer with --json, and on failure one line on stderr and a non-zero exit
// code: 1 for a failed command, 2 for a command line that does not parse
// (a bare rscoord too: its usage goes to stderr).
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/rscoord/rscoord/client/protocol"
)

// Exit codes of the CLI.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // the command line does not parse
)

// CLI is the root command line of rscoord.
type CLI struct {
	VersionFlag kong.VersionFlag `name:"version" help:"Print the version and exit."`

	Serve    ServeCmd    `cmd:"" help:"Run the coordinator server."`
	Stream   StreamCmd   `cmd:"" help:"Create, scale and inspect streams."`
	Group    GroupCmd    `cmd:"" help:"Create, inspect and delete consumer groups."`
	Shards   ShardsCmd   `cmd:"" help:"Show every shard of a group as Redis has it: length, pending, lag, owners."`
	Offsets  OffsetsCmd  `cmd:"" help:"Show where a consumer group stands on every shard; offsets reset moves it."`
	Messages MessagesCmd `cmd:"" help:"Page through the entries of one shard (nothing is delivered or acknowledged)."`
	Audit    AuditCmd    `cmd:"" help:"Page through the audit log of admin mutations, newest first."`
	Login    LoginCmd    `cmd:"" help:"Log in and save the token (mode 0600, under the user's config directory) for later commands."`
	Logout   LogoutCmd   `cmd:"" help:"Revoke the token saved for --server on the server, then forget it."`
	Token    TokenCmd    `cmd:"" help:"Create, list and revoke long-lived API tokens for services (ADMIN)."`
	Version  VersionCmd  `cmd:"" help:"Print the version of this binary and the protocol versions it speaks."`
	Probe    ProbeCmd    `cmd:"" help:"GET a URL and exit 0 on a 2xx answer, 1 otherwise: a container healthcheck (the image has no curl)."`

	Completion   CompletionCmd   `cmd:"" help:"Print a shell completion script (bash, zsh or fish)."`
	HashPassword HashPasswordCmd `cmd:"" name:"hash-password" help:"Print the bcrypt hash of a password, for the --users file; reads it without echo on a terminal, else from stdin."`

	ImportReference ImportReferenceCmd `cmd:"" name:"import-reference" help:"Create on this coordinator the streams and groups the reference coordinator keeps in Redis; a dry run unless --execute."`
}

// AdminFlags are the flags shared by every command that talks to a
// coordinator.
type AdminFlags struct {
	Server  string        `default:"http://127.0.0.1:8080" env:"RSCOORD_SERVER" help:"Coordinator: a base URL, or host:port for http://host:port."`
	JSON    bool          `name:"json" help:"Print the JSON answer instead of a table."`
	Timeout time.Duration `default:"10s" help:"Bound on each request to the coordinator (0: none)."`

	User     string `env:"RSCOORD_USER" help:"User name sent with Basic credentials."`
	Password string `env:"RSCOORD_PASSWORD" help:"Password of --user (prefer the environment variable: ps shows flags)."`
	Token    string `env:"RSCOORD_TOKEN" help:"Bearer token from /auth/login, instead of --user/--password (default: the token rscoord login saved for --server)."`
}

// authorization is the Authorization header the flags ask for: Bearer
// --token, Basic --user/--password, or none.
func (f *AdminFlags) authorization() (string, error) {
	switch {
	case f.Token != "" && (f.User != "" || f.Password != ""):
		return "", errors.New("--token and --user/--password: give one or the other")
	case f.Token != "":
		return "Bearer " + f.Token, nil
	case f.User != "" && f.Password == "":
		return "", errors.New("--user needs --password (or RSCOORD_PASSWORD)")
	case f.User == "" && f.Password != "":
		return "", errors.New("--password needs --user (or RSCOORD_USER)")
	case f.User != "":
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(f.User+":"+f.Password)), nil
	}
	return "", nil
}

// Admin is what an admin command runs with: the API client, where to print
// and how.
type Admin struct {
	// Client talks to the coordinator.
	Client *Client
	// Out receives human and JSON output.
	Out io.Writer
	// JSON selects JSON output instead of tables.
	JSON bool
	// Tokens holds the logins saved by "rscoord login".
	Tokens tokenStore
}

// ProvideAdmin builds the [Admin] that kong injects into the Run method of
// every command below a command embedding AdminFlags.
func (f *AdminFlags) ProvideAdmin(out io.Writer) (*Admin, error) {
	client, err := NewClient(f.Server, f.Timeout)
	if err != nil {
		return nil, fmt.Errorf("--server/--timeout: %w", err)
	}
	if client.authorization, err = f.authorization(); err != nil {
		return nil, err
	}
	tokens, err := defaultTokenStore()
	if err != nil {
		return nil, err
	}
	if client.authorization == "" {
		// No credentials given: use the token "rscoord login" saved for
		// this server, if it has not expired.
		saved, ok, err := tokens.lookup(client.base, time.Now())
		if err != nil {
			return nil, err
		}
		if ok {
			client.authorization = "Bearer " + saved.AccessToken
		}
	}
	return &Admin{Client: client, Out: out, JSON: f.JSON, Tokens: tokens}, nil
}

// defaultRequester is the default of --requested-by: $USER, else "cli".
func defaultRequester() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "cli"
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runWithInput(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitRequest carries kong's exit code (after --help, say) out of the
// parser: kong.Exit must not end the process when run is called by tests.
type exitRequest struct{ code int }

// run is runWithInput with an empty stdin.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithInput(ctx, args, strings.NewReader(""), stdout, stderr)
}

// runWithInput parses args, runs the selected command with ctx and returns
// the exit code. Input comes from stdin (hash-password); output goes to
// stdout; errors, one line each, to stderr.
func runWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	if len(args) == 0 {
		// A bare rscoord shows what it can do, on stderr, and exits as a
		// command line that does not parse: a script that lost its
		// command must not see success, nor usage text as its output.
		if code := runWithInput(ctx, []string{"--help"}, stdin, stderr, stderr); code != exitOK {
			return code
		}
		return exitUsage
	}
	var cli CLI
	parser, err := newParser(ctx, &cli, stdin, stdout, stderr)
	if err != nil {
		// The grammar is ours: a failure here is a programming error.
		fmt.Fprintf(stderr, "rscoord: build command line: %v\n", err)
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
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "rscoord: %v (see rscoord --help)\n", err)
		return exitUsage
	}
	if err := kctx.Run(); err != nil {
		if jsonRequested(kctx) {
			writeJSONError(stderr, err)
		} else {
			fmt.Fprintf(stderr, "rscoord: %s\n", errorLine(err))
		}
		return exitError
	}
	return exitOK
}

// newParser is rscoord's command line parser, filling cli.
func newParser(ctx context.Context, cli *CLI, stdin io.Reader, stdout, stderr io.Writer) (*kong.Kong, error) {
	return kong.New(cli,
		kong.Name("rscoord"),
		kong.Description("Shard coordinator for Redis Streams, and its admin CLI."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitRequest{code}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Configuration(loadYAMLConfig),
		kong.Resolvers(aliasResolver{lookup: os.LookupEnv}),
		kong.Vars{"requester": defaultRequester(), "version": versionLine()},
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.BindTo(stdout, (*io.Writer)(nil)),
		kong.BindTo(stdin, (*io.Reader)(nil)),
		kong.Bind(stderrWriter{stderr}),
	)
}

// jsonRequested reports whether the command line selected --json.
func jsonRequested(kctx *kong.Context) bool {
	for _, f := range kctx.Flags() {
		if f.Name == "json" {
			on, _ := kctx.FlagValue(f).(bool)
			return on
		}
	}
	return false
}

// jsonError is how a failure is printed under --json: the server's error
// body (docs/protocol.md §3) with its HTTP status, or errorCode CLI_ERROR
// for a failure before or outside any answer.
type jsonError struct {
	HTTPStatus int                `json:"httpStatus,omitempty"`
	Status     string             `json:"status,omitempty"`
	ErrorCode  protocol.ErrorCode `json:"errorCode"`
	Message    string             `json:"message"`
	RetryAfter string             `json:"retryAfter,omitempty"`
}

// writeJSONError prints err as one JSON line on w.
func writeJSONError(w io.Writer, err error) {
	out := jsonError{ErrorCode: "CLI_ERROR", Message: errorLine(err)}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		out = jsonError{HTTPStatus: apiErr.StatusCode, Status: apiErr.Body.Status, ErrorCode: apiErr.Body.ErrorCode,
			Message: apiErr.Body.Message}
		if apiErr.RetryAfter > 0 {
			out.RetryAfter = strconv.FormatInt(int64(apiErr.RetryAfter/time.Second), 10)
		}
		if out.ErrorCode == "" {
			out.ErrorCode = "HTTP_ERROR"
		}
		if out.Status == "" {
			out.Status = protocol.StatusName(apiErr.StatusCode)
		}
	}
	raw, _ := json.Marshal(out) // a struct of strings and ints always encodes
	fmt.Fprintf(w, "%s\n", raw)
}

// errorLine is the one-line message of a failed command. An HTTP error is
// shown as the server put it, "409 GROUP_ALREADY_EXISTS: Group already
// exists": the operation is the command the user just typed.
func errorLine(err error) string {
	msg := err.Error()
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		msg = apiErr.Error()
	}
	return strings.Join(strings.Fields(msg), " ")
}
