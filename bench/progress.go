package bench

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress bars on stderr (schollz/progressbar), one per phase.

// bar wraps a progress bar that may be off.
type bar struct{ pb *progressbar.ProgressBar }

func newBar(w io.Writer, total int, what string) *bar {
	if w == nil {
		return &bar{}
	}
	return &bar{pb: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())}
}

func (b *bar) add() {
	if b.pb != nil {
		_ = b.pb.Add(1)
	}
}

func (b *bar) set(n int) {
	if b.pb != nil {
		_ = b.pb.Set(n)
	}
}

func (b *bar) finish() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}
