#!/usr/bin/env python3
"""Drive one headless Chromium page for scripts/e2e_console.sh.

Chromium runs with --remote-debugging-pipe and this program speaks the
DevTools protocol to it (JSON messages, NUL-separated, on fds 3 and 4),
so the page stays open in real time between the script's steps: the
script can stop a broker under an open page and watch the page react,
or fill in and submit the console's own forms.

Commands, one a line on stdin; each answers one line on stdout, "ok ..."
or "error ...":

  open URL                 load URL, wait for the document to be complete
  wait SECONDS JS          evaluate JS until it is true (real time)
  eval JS                  evaluate JS, answer its value as JSON
  dom FILE                 save the page's HTML in FILE
  shot FILE                save a PNG screenshot of the whole page (down to
                           2400 px) in FILE
  quit

Usage: console_browser.py CHROMIUM-ARGS... (the script's chromium options)
"""

import base64
import json
import os
import subprocess
import sys
import time


class Browser:
    def __init__(self, args):
        # Chromium reads commands on its fd 3 and writes answers on fd 4.
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def fds():
            # Moved away first: a pipe may already be fd 3 or 4.
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            ["chromium", "--remote-debugging-pipe"] + args + ["about:blank"],
            pass_fds=(3, 4), preexec_fn=fds,
            stdout=subprocess.DEVNULL, stderr=sys.stderr)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0
        self.session = None
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]

    def call(self, method, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium exited")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") != self.next_id:
                continue  # an event, or another session's answer
            if "error" in answer:
                raise RuntimeError(f"{method}: {answer['error'].get('message')}")
            return answer.get("result", {})

    def eval(self, js):
        r = self.call("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("script failed: " + r["exceptionDetails"].get("text", "")
                               + " " + str(r["exceptionDetails"].get("exception", {}).get("description", "")))
        return r.get("result", {}).get("value")

    def wait(self, seconds, js):
        deadline = time.monotonic() + seconds
        while True:
            try:
                if self.eval(js):
                    return
            except RuntimeError:
                pass  # a page being replaced by a navigation
            if time.monotonic() > deadline:
                raise RuntimeError(f"not true within {seconds}s: {js}")
            time.sleep(0.05)

    def open(self, url):
        self.call("Page.navigate", url=url)
        self.wait(30, f"location.href === {json.dumps(url)} && document.readyState === 'complete'")

    def close(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    b = Browser(sys.argv[1:])
    try:
        for line in sys.stdin:
            cmd, _, arg = line.rstrip("\n").partition(" ")
            try:
                if cmd == "quit":
                    print("ok", flush=True)
                    return
                if cmd == "open":
                    b.open(arg)
                    out = ""
                elif cmd == "wait":
                    secs, _, js = arg.partition(" ")
                    b.wait(float(secs), js)
                    out = ""
                elif cmd == "eval":
                    out = json.dumps(b.eval(arg))
                elif cmd == "dom":
                    with open(arg, "w", encoding="utf-8") as f:
                        f.write(b.eval("document.documentElement.outerHTML"))
                    out = ""
                elif cmd == "shot":
                    # The whole page, down to 2400 px.
                    size = b.call("Page.getLayoutMetrics")["cssContentSize"]
                    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 2400), "scale": 1}
                    png = b.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
                    with open(arg, "wb") as f:
                        f.write(base64.b64decode(png))
                    out = ""
                else:
                    raise RuntimeError(f"unknown command {cmd!r}")
                print(("ok " + out).rstrip(), flush=True)
            except RuntimeError as e:
                print("error " + str(e).replace("\n", " "), flush=True)
    finally:
        b.close()


if __name__ == "__main__":
    main()
