// Package chromium starts the headless Chromium (Debian's chromium package)
// that the browser tests drive, one per test, and saves their screenshots
// where the test's artifacts variable says.
package chromium

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// Browser is one headless Chromium of a test.
type Browser struct {
	// Ctx runs actions in the browser's one tab.
	Ctx context.Context
	// Dir is where Shot saves screenshots.
	Dir string
	t   testing.TB
}

// Start launches Chromium for t's lifetime (or ctx's, whichever ends
// first), in a window of width × height, with extra flags. Screenshots go to
// the directory $artifactsEnv names, else to a temporary directory (printed
// in the log).
func Start(ctx context.Context, t testing.TB, artifactsEnv string, width, height int, extra ...chromedp.ExecAllocatorOption) *Browser {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (scripts/setup/system.sh chromium installs it): %v", err)
	}
	dir := os.Getenv(artifactsEnv)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
	}, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return &Browser{Ctx: bctx, Dir: dir, t: t}
}

// Shot is an action that saves a full-page screenshot as name.png in Dir.
func (b *Browser) Shot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		p := filepath.Join(b.Dir, name+".png")
		b.t.Logf("screenshot %s", p)
		return os.WriteFile(p, png, 0o644)
	})
}
