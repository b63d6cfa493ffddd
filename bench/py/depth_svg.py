#!/usr/bin/env python3
"""Plot reads in flight over time, one line per ring, as an SVG (no dependencies).

Input: files of "TIME_NS IN_FLIGHT" lines, one per worker, as the experiment build of
the knobs patch of docs/tuning.md ("Cold-read experiments: the knobs patch") writes them (GRIST_X_DEPTH=PREFIX gives PREFIX.0, PREFIX.1).
Each file is drawn as a step line; the figure's title says what ran.

  bench/py/depth_svg.py --title "per completion" --out a.svg /tmp/d.0 /tmp/d.1
"""
import argparse

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def load(path):
    pts = []
    with open(path) as f:
        for line in f:
            t, d = line.split()
            pts.append((int(t), int(d)))
    return pts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="reads in flight per ring")
    ap.add_argument("--ms", type=float, default=0, help="plot only the first MS milliseconds (0: all)")
    ap.add_argument("--depth", type=int, default=0, help="y axis top (0: the largest value)")
    a = ap.parse_args()
    series = [load(p) for p in a.files]
    t0 = min(s[0][0] for s in series if s)
    t1 = max(s[-1][0] for s in series if s)
    if a.ms:
        t1 = min(t1, t0 + int(a.ms * 1e6))
    top = a.depth or max(d for s in series for _, d in s)
    W, H, L, B, T, R = 900, 300, 50, 40, 30, 20
    x = lambda t: L + (t - t0) / max(1, t1 - t0) * (W - L - R)
    y = lambda d: T + (1 - d / max(1, top)) * (H - T - B)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (W, H), '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="18">%s</text>' % (L, a.title)]
    for k in range(5):
        d = top * k / 4
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (L, W - R, y(d), y(d)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (L - 5, y(d) + 4, round(d, 1)))
    for k in range(6):
        t = t0 + (t1 - t0) * k / 5
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%.0f ms</text>' % (x(t), H - B + 16,
                                                                               (t - t0) / 1e6))
    for i, s in enumerate(series):
        pts, last = [], None
        for t, d in s:
            if t > t1:
                break
            if last is not None:
                pts.append("%.1f,%.1f" % (x(t), y(last)))
            pts.append("%.1f,%.1f" % (x(t), y(d)))
            last = d
        out.append('<polyline fill="none" stroke="%s" stroke-width="1" points="%s"/>' % (
            COLORS[i % len(COLORS)], " ".join(pts)))
        out.append('<text x="%d" y="%d" fill="%s">ring %d</text>' % (W - R - 60, T + 14 * (i + 1),
                                                                    COLORS[i % len(COLORS)], i))
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
