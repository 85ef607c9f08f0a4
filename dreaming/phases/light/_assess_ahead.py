"""Assessing new candidates ahead: on a night when light itself is the slower half, a forked
child reads the salience of the candidates each batch made while light folds the next ones.

Light's rescore assesses every new candidate of the owner's once (`assess_new`, about 0.1 ms
of regex work each, half of them in a child forked then: `forking.split_map`). Over many
short sessions (a chat, hundreds of thousands of lines) most of what the owner says is said
once, so each such line makes a candidate, and that rescore took a tenth of light. Meanwhile
the second core is mostly idle: reading is the cheap half there, and the reading child
(`_ahead`) waits with its results ready. So after a batch's commit, when the reading child
is ahead (light would not wait for its next read), the texts of the candidates the batch
made go to this child, and the rescore finds their answers made.

It changes nothing the night computes: `assess` is a pure function of the text and the
lexicon, and the child was forked with this process's own lexicon (the one the rescore
asks for: `answers` gives nothing for another). What the child did not answer, whatever
happened to it (killed, out of memory, a message that does not arrive), the rescore
assesses itself, as before.

Never waiting on the child: texts go out on a socket this process does not block on (what
does not fit is sent with the next batch; past `MAX_HELD` waiting, texts are left to the
rescore), and the child keeps its answers until light asks for them, so neither side fills
the other's buffer while the other writes. Only `answers` waits: for the child to finish
what it has taken (at most the socket's buffers beyond what it worked through during the
night); what it never took goes back to the rescore, which splits it over both cores. A
purge in the run drops the child (`close`): no text of a purged line outlives it in memory
(`text_memo`).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections import deque
from collections.abc import Sequence

from dreaming import forking
from dreaming.ingest import salience

# A child pays for its fork once a batch has this many texts to assess (as `split_map` does
# from `SPLIT_FROM`): over real coding sessions an agent's batch makes a few hundred.
START_FROM = 500
_BUFFER = 1 << 20  # socket buffers: a batch's texts (tens of KB) go out in one write
# Texts waiting here for a child that lags (pickled): past this, the rescore keeps them.
MAX_HELD = 8 << 20
NICE = 10  # the child yields to light's own process when both want a core
_NO_SIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)


class AssessAhead:
    """A forked child assessing the texts it is sent with `lexicon`, answering when asked."""

    def __init__(self, lexicon: salience.Lexicon) -> None:
        self.lexicon = lexicon
        self._texts: list[str] = []  # every text handed over, in order: the answers come in it
        # Frames not yet wholly sent (each with its count of texts), the first from `_sent` on.
        self._queued: deque[tuple[bytes, int]] = deque()
        self._sent = 0
        self._held = 0  # bytes queued
        ours, theirs = socket.socketpair()
        try:
            for s in (ours, theirs):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _BUFFER)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _BUFFER)
            pid = forking.fork()
        except BaseException:
            ours.close()
            theirs.close()
            raise
        if pid == 0:  # the child: never returns
            _child(theirs.fileno(), lexicon)
        theirs.close()
        ours.setblocking(False)
        self._sock: socket.socket | None = ours
        self._pid: int | None = pid

    def send(self, texts: Sequence[str]) -> None:
        """Have the child assess `texts` (without waiting for it to take them). While more
        than `MAX_HELD` waits here for a child that lags, the rescore keeps them."""
        if self._sock is None or not texts or self._held >= MAX_HELD:
            return
        frame = forking.framed(list(texts))
        self._texts.extend(texts)
        self._queued.append((frame, len(texts)))
        self._held += len(frame)
        try:
            self._flush(whole=False)
        except OSError:  # the child is gone: the rescore assesses everything itself
            self.close()

    def _flush(self, *, whole: bool) -> None:
        """Send what is queued, as far as the socket takes it now; `whole`: only the rest of
        a frame partly sent (the child reads whole frames), waiting for the child to take
        it, and the frames never begun are left to the rescore, their texts with them."""
        sock = self._sock
        assert sock is not None
        if whole:
            while len(self._queued) > (1 if self._sent else 0):
                _, count = self._queued.pop()
                del self._texts[len(self._texts) - count :]
            sock.setblocking(True)
        while self._queued:
            frame, _ = self._queued[0]
            try:
                # MSG_NOSIGNAL: a child gone is an error here, never a SIGPIPE for light.
                self._sent += sock.send(memoryview(frame)[self._sent :], _NO_SIGNAL)
            except BlockingIOError:
                return  # the child is busy: the rest goes with the next batch
            if self._sent == len(frame):
                self._queued.popleft()
                self._held -= len(frame)
                self._sent = 0

    def answers(self, lexicon: salience.Lexicon) -> dict[str, tuple[float, str]]:
        """Each text handed over, with its salience and features as `assess` with `lexicon`
        gives them; nothing when the child used another lexicon or cannot answer. Ends the
        child."""
        sock = self._sock
        if sock is None or lexicon is not self.lexicon or not self._texts:
            self.close()
            return {}
        try:
            self._flush(whole=True)
            texts = self._texts
            sock.shutdown(socket.SHUT_WR)  # the child answers once it has read everything
            found = forking.receive(sock.fileno())
        except Exception:  # whatever it was (the child gone), the rescore assesses them
            found = texts = None
        finally:
            self.close()
        if not isinstance(found, list) or texts is None or len(found) != len(texts):
            return {}
        return dict(zip(texts, found, strict=True))

    def close(self) -> None:
        """Stop the child (if still there) and reap it, dropping its work. Safe to call more
        than once."""
        self._texts, self._queued, self._sent, self._held = [], deque(), 0, 0
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._pid is not None:
            pid, self._pid = self._pid, None
            forking.stop(pid)


def _child(fd: int, lexicon: salience.Lexicon) -> None:
    """The forked child's whole life: assess each text sent until light stops sending, then
    answer them all, in order."""
    with forking.child(keep=fd) as fd, socket.socket(fileno=fd) as sock:
        os.nice(NICE)
        found: list[tuple[float, str]] = []
        while True:
            try:
                texts = forking.receive(sock.fileno())
            except EOFError:
                break
            for text in texts:
                assessed = salience.assess(text, lexicon)
                found.append((assessed.value, assessed.names()))
        with contextlib.suppress(OSError):
            sock.sendall(forking.framed(found))
