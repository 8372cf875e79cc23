"""Session-wide test setup."""

import signal

# A shell that starts a job in the background without job control (`cmd &` in a script) starts
# it with SIGINT ignored, and an ignored signal stays ignored across exec: the Ctrl-C tests'
# children would never see their SIGINT. A handler is reset to the default at exec, so the
# children get a working Ctrl-C again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
