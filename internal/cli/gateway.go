package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/spf13/cobra"
)

// DefaultGatewayURL is used when neither --url nor OPENCLAW_URL is set.
const DefaultGatewayURL = "ws://127.0.0.1:18789"

// gatewayFlags are the connection flags shared by the gateway subcommands.
type gatewayFlags struct {
	url, token, password string
	timeout              time.Duration
}

// options resolves flags, then environment, into gateway.Options.
func (f *gatewayFlags) options(env Env) gateway.Options {
	sv := settingsOf(env)
	o := gateway.Options{
		URL:      cmp.Or(f.url, sv.OpenClawURL, DefaultGatewayURL),
		Token:    cmp.Or(f.token, sv.GatewayToken),
		Password: cmp.Or(f.password, sv.OpenClawPassword),
	}
	o.Headers, _ = gateway.ParseHeaders(sv.GatewayHeaders) // checked by settings.Load
	o.CallTimeout = f.timeout
	return o
}

func (f *gatewayFlags) dial(ctx context.Context, env Env) (*gateway.Client, error) {
	o := f.options(env)
	if _, err := gateway.NormalizeURL(o.URL); err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	dctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := gateway.Dial(dctx, o)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func newGatewayCmd(env Env) *cobra.Command {
	f := &gatewayFlags{}
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Talk to an OpenClaw Gateway directly",
		Long: `Talk to an OpenClaw Gateway directly over its WebSocket protocol.

Connection settings come from flags, else from the environment:
  --url       OPENCLAW_URL            (default ` + DefaultGatewayURL + `)
  --token     OPENCLAW_GATEWAY_TOKEN
  --password  OPENCLAW_PASSWORD
Extra upgrade headers come from CLAWCONNECT_GATEWAY_HEADERS (a JSON object).`,
		Example: `  clawconnect gateway ping
  clawconnect gateway ping --url ws://127.0.0.1:18789 --token "$OPENCLAW_GATEWAY_TOKEN"
  clawconnect gateway call health
  clawconnect gateway call sessions.list --params '{"limit":5}'`,
	}
	groupCmd(cmd)
	cmd.PersistentFlags().StringVar(&f.url, "url", "", "gateway URL (ws, wss, http or https)")
	cmd.PersistentFlags().StringVar(&f.token, "token", "", "gateway token")
	cmd.PersistentFlags().StringVar(&f.password, "password", "", "gateway password")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 30*time.Second, "timeout for the handshake and for each call")
	cmd.AddCommand(newGatewayPingCmd(env, f), newGatewayCallCmd(env, f))
	return cmd
}

type pingResult struct {
	URL           string   `json:"url"`
	ServerVersion string   `json:"serverVersion"`
	Protocol      int      `json:"protocol"`
	Role          string   `json:"role"`
	Scopes        []string `json:"scopes"`
	HandshakeMs   int64    `json:"handshakeMs"`
	Methods       []string `json:"methods"`
}

func newGatewayPingCmd(env Env, f *gatewayFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ping",
		Short: "Connect, complete the handshake and show what the gateway offers",
		Long: `Connect to the gateway, complete its handshake and print its version,
protocol, the role and scopes granted and the methods it offers.

Exit codes: 0 the handshake completed, 1 the gateway could not be reached or
refused the credentials, 2 bad flags, 3 an unusable setting.`,
		Example: `  clawconnect gateway ping
  clawconnect gateway ping --json | jq -r '.methods[]'
  OPENCLAW_URL=wss://gw.example.com clawconnect gateway ping --password "$OPENCLAW_PASSWORD"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			c, err := f.dial(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer c.Close()
			h := c.Hello()
			res := pingResult{URL: f.options(env).URL, ServerVersion: h.ServerVersion, Protocol: h.Protocol, Role: h.Role,
				Scopes: h.Scopes, HandshakeMs: time.Since(start).Milliseconds(), Methods: h.Methods}
			if asJSON {
				return writeJSON(env, res, true)
			}
			fmt.Fprintf(env.Stdout, "gateway   %s (OpenClaw %s)\n", config.RedactURL(res.URL), res.ServerVersion)
			fmt.Fprintf(env.Stdout, "protocol  %d\n", res.Protocol)
			fmt.Fprintf(env.Stdout, "role      %s\n", res.Role)
			fmt.Fprintf(env.Stdout, "scopes    %v\n", res.Scopes)
			fmt.Fprintf(env.Stdout, "handshake %d ms\n", res.HandshakeMs)
			fmt.Fprintf(env.Stdout, "methods   %d offered\n", len(res.Methods))
			for _, m := range res.Methods {
				fmt.Fprintf(env.Stdout, "  %s\n", m)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newGatewayCallCmd(env Env, f *gatewayFlags) *cobra.Command {
	var params string
	var raw, expectFinal bool
	cmd := &cobra.Command{
		Use:   "call METHOD",
		Short: "Call any gateway method (plugin methods included) and print the JSON result",
		Long: `Connect to the gateway, call METHOD with --params and print its JSON result.

Exit codes: 0 the method answered, 1 the gateway could not be reached or the
method failed (its error is printed), 2 no METHOD or --params not valid JSON,
3 an unusable setting.`,
		Example: `  clawconnect gateway call health
  clawconnect gateway call sessions.list --params '{"limit":5}'
  clawconnect gateway call agent --expect-final --params '{"message":"hi","sessionKey":"agent:main:main","idempotencyKey":"k1"}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return &ExitError{Code: ExitUsage, Err: errors.New("gateway call: name the METHOD to call, e.g. clawconnect gateway call health (clawconnect gateway ping lists the methods)")}
			case len(args) > 1:
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("gateway call: one METHOD, got %d arguments; pass its params with --params JSON", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if params == "" {
				params = "{}"
			}
			if !json.Valid([]byte(params)) {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--params is not valid JSON: %s", params)}
			}
			c, err := f.dial(cmd.Context(), env)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.CallWith(cmd.Context(), args[0], json.RawMessage(params), gateway.CallOptions{ExpectFinal: expectFinal})
			if err != nil {
				var re *gateway.RPCError
				if errors.As(err, &re) && len(re.Details) > 0 {
					return fmt.Errorf("%w (details: %s)", err, re.Details)
				}
				return err
			}
			if raw {
				_, err := fmt.Fprintf(env.Stdout, "%s\n", res)
				return err
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, res, "", "  "); err != nil {
				_, err := fmt.Fprintf(env.Stdout, "%s\n", res)
				return err
			}
			buf.WriteByte('\n')
			_, err = env.Stdout.Write(buf.Bytes())
			return err
		},
	}
	cmd.Flags().StringVar(&params, "params", "{}", "method params as a JSON object")
	cmd.Flags().BoolVar(&raw, "json", false, "print the raw JSON payload (compact, as received)")
	cmd.Flags().BoolVar(&expectFinal, "expect-final", false, "for methods that answer twice (agent), wait for the final answer")
	return cmd
}

func writeJSON(env Env, v any, indent bool) error {
	enc := json.NewEncoder(env.Stdout)
	if indent {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}
