package gateway_test

import (
	"context"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

// Dial a gateway, submit one message to a session and wait for its outcome.
// A stand-in gateway answers here; against a real one, URL is its
// ws://host:18789 address and Token or Password its credential.
func Example() {
	gw := fakegateway.Start(fakegateway.Options{Token: fakegateway.Token})
	defer gw.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := gateway.Dial(ctx, gateway.Options{URL: gw.URL(), Token: fakegateway.Token})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	run, err := c.StartRun(ctx, gateway.RunRequest{
		SessionKey:     "task-42", // canonicalized to agent:main:task-42
		Message:        "Summarise the open pull requests",
		IdempotencyKey: "task-42-attempt-1", // a resubmit joins this run
	})
	if err != nil {
		panic(err)
	}
	defer run.Close()
	out, err := run.Wait(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.SessionKey, out.Status, out.Text)
	// Output: agent:main:task-42 ok FAKE-REPLY: Summarise the open pull requests
}
