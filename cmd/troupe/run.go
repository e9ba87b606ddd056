package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

// defaultAddr is system.DefaultAdminBind (a test keeps them equal): the
// CLI does not link the runtime for one constant.
const defaultAddr = "127.0.0.1:7401"

// tokenEnv names the environment variable the token defaults to.
const tokenEnv = "TROUPE_ADMIN_TOKEN"

const usage = `usage: troupe [flags] command [args]

commands:
  status                 this member: identity, readiness, cluster size, placement version
  members                the members as this member sees them
      --status s[,s]     only these statuses (alive, suspect, dead, leaving, joining)
      --type T           only members hosting actor type T
      --role R           only members whose node record has role R
      --label k=v        only members whose node record has label k=v
                         (repeatable: every one must match)
  records                the node records: heartbeat age, health, readiness, version
  placement              each actor type's ring: the share each member owns
  where TYPE KEY         the replicas and the owner of one key
  types                  the actor types this member hosts, with their activations

flags:
`

// options are the flags every command takes.
type options struct {
	addr    string
	token   string
	tlsCA   string
	tlsCert string
	tlsKey  string
	json    bool
	timeout time.Duration
}

// usageError is bad usage: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// register adds the common flags to fs, defaulting to o's values (so
// that flags given before the command carry over).
func register(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.addr, "addr", o.addr, "the admin listener: host:port or an http(s) URL")
	fs.StringVar(&o.token, "token", o.token, "bearer token (default $"+tokenEnv+")")
	fs.StringVar(&o.tlsCA, "tls-ca", o.tlsCA, "PEM file of the CAs that sign the listener's certificate")
	fs.StringVar(&o.tlsCert, "tls-cert", o.tlsCert, "PEM file of a client certificate")
	fs.StringVar(&o.tlsKey, "tls-key", o.tlsKey, "PEM file of the client certificate's key")
	fs.BoolVar(&o.json, "json", o.json, "print the API's JSON as it came")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "time the whole command may take")
}

// run runs the CLI with args (without the program name) and returns its
// exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o := options{addr: defaultAddr, timeout: 10 * time.Second}
	top := flag.NewFlagSet("troupe", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	register(top, &o)
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, usage)
		top.SetOutput(w)
		top.PrintDefaults()
		top.SetOutput(io.Discard)
	}
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "troupe: %v\n", err)
		printUsage(stderr)
		return 2
	}
	if top.NArg() == 0 {
		fmt.Fprintln(stderr, "troupe: no command")
		printUsage(stderr)
		return 2
	}
	err := command(top.Arg(0), top.Args()[1:], &o, stdout)
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "troupe: %v\n", err)
		printUsage(stderr)
		return 2
	}
	fmt.Fprintf(stderr, "troupe: %v\n", err)
	return 1
}

// members' own flags.
type memberFlags struct {
	statuses []string
	typ      string
	role     string
	labels   []string
}

// command parses the command's flags and arguments, then runs it.
func command(name string, args []string, o *options, stdout io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	register(fs, o)
	var mf memberFlags
	wantArgs := 0
	switch name {
	case "status", "placement", "types", "records":
	case "members":
		fs.Func("status", "only these statuses (a comma list; repeatable)", func(v string) error {
			mf.statuses = append(mf.statuses, v)
			return nil
		})
		fs.StringVar(&mf.typ, "type", "", "only members hosting this actor type")
		fs.StringVar(&mf.role, "role", "", "only members whose node record has this role")
		fs.Func("label", "only members whose node record has this label, key=value (repeatable: all must match)", func(v string) error {
			mf.labels = append(mf.labels, v)
			return nil
		})
	case "where":
		wantArgs = 2
	default:
		// Not repeated: a misplaced argument may be the token
		// ("troupe --token status s3cr3t").
		return usagef("unknown command: the commands are status, members, records, placement, where and types")
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%s: %v", name, err)
	}
	if len(pos) != wantArgs {
		if name == "where" {
			return usagef("where takes TYPE and KEY, got %d arguments", len(pos))
		}
		return usagef("%s takes no arguments, got %d", name, len(pos)) // not repeated, as above
	}
	for _, l := range mf.labels {
		if k, _, ok := strings.Cut(l, "="); !ok || k == "" {
			return usagef("members: --label takes key=value") // not repeated, as above
		}
	}
	if o.timeout <= 0 {
		return usagef("--timeout must be above zero")
	}
	if o.token == "" {
		o.token = os.Getenv(tokenEnv)
	}
	c, err := newClient(o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	defer c.close()
	switch name {
	case "status":
		return status(ctx, c, o.json, stdout)
	case "members":
		q := url.Values{}
		if len(mf.statuses) > 0 {
			q.Set("status", strings.Join(mf.statuses, ","))
		}
		if mf.typ != "" {
			q.Set("type", mf.typ)
		}
		if mf.role != "" {
			q.Set("role", mf.role)
		}
		for _, l := range mf.labels {
			q.Add("label", l)
		}
		return members(ctx, c, q, o.json, stdout)
	case "placement":
		return placement(ctx, c, o.json, stdout)
	case "where":
		return where(ctx, c, pos[0], pos[1], o.json, stdout)
	case "records":
		return records(ctx, c, o.json, stdout)
	default:
		return types(ctx, c, o.json, stdout)
	}
}

// parseInterleaved parses args with fs, letting flags follow the
// positional arguments too ("where cart k1 --json"); "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
