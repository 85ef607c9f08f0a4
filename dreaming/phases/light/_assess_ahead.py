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
does not fit waits for the next batch, or for `answers`), and the child keeps its answers
until light asks for them, so neither side fills the other's buffer while the other writes.
Only `answers` waits, for what the child was given and has not finished, which is work the
rescore would otherwise do then. A purge in the run drops the child (`close`): no text of a
purged line outlives it in memory (`text_memo`).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence

from dreaming import forking
from dreaming.ingest import salience

# A child pays for its fork (~10 ms) once a batch has this many texts to assess.
START_FROM = 200
_BUFFER = 1 << 20  # socket buffers: a batch's texts (tens of KB) go out in one write
NICE = 10


class AssessAhead:
    """A forked child assessing the texts it is sent with `lexicon`, answering when asked."""

    def __init__(self, lexicon: salience.Lexicon) -> None:
        self.lexicon = lexicon
        self._texts: list[str] = []  # every text sent, in order: the answers come in it
        self._unsent = bytearray()
        ours, theirs = socket.socketpair()
        try:
            for s in (ours, theirs):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _BUFFER)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _BUFFER)
            pid = forking.fork()
        except OSError:
            ours.close()
            theirs.close()
            raise
        if pid == 0:  # the child: never returns
            _child(theirs.fileno(), lexicon)
        theirs.close()
        ours.setblocking(False)
        self._sock: socket.socket | None = ours
        self._pid: int | None = pid

    @property
    def alive(self) -> bool:
        return self._sock is not None

    def send(self, texts: Sequence[str]) -> None:
        """Have the child assess `texts` (without waiting for it to take them)."""
        if self._sock is None or not texts:
            return
        self._texts.extend(texts)
        self._unsent += forking.framed(list(texts))
        self._flush()

    def _flush(self) -> None:
        assert self._sock is not None
        try:
            sent = self._sock.send(self._unsent)
        except BlockingIOError:
            return  # the child is busy: the rest goes with the next batch
        except OSError:  # the child is gone: the rescore assesses everything itself
            self.close()
            return
        del self._unsent[:sent]

    def answers(self, lexicon: salience.Lexicon) -> dict[str, tuple[float, str]]:
        """Each text sent, with its salience and features as `assess` with `lexicon` gives
        them; nothing when the child used another lexicon or cannot answer. Ends the child."""
        sock, texts = self._sock, self._texts
        if sock is None or lexicon is not self.lexicon or not texts:
            self.close()
            return {}
        try:
            sock.setblocking(True)
            sock.sendall(self._unsent)
            sock.shutdown(socket.SHUT_WR)  # the child answers once it has read everything
            found = forking.receive(sock.fileno())
        except Exception:  # whatever it was, the rescore assesses them itself
            found = None
        finally:
            self.close()
        if not isinstance(found, list) or len(found) != len(texts):
            return {}
        return dict(zip(texts, found, strict=True))

    def close(self) -> None:
        """Stop the child (if still there) and reap it, dropping its work. Safe to call more
        than once."""
        self._texts, self._unsent = [], bytearray()
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
