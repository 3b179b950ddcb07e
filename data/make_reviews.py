"""Regenerates reviews.csv, the small labelled dataset of notebook 08 (templated reviews written for the course).

Three malformed rows are inserted on purpose: notebook 08 must find and report them.
Run: python data/make_reviews.py
"""

import csv
import random
from pathlib import Path

rng = random.Random(7)
products = {
    "headphones": ("sound", "battery", "headband"),
    "coffee maker": ("carafe", "timer", "filter"),
    "backpack": ("zipper", "strap", "main pocket"),
    "phone case": ("grip", "button cover", "camera cutout"),
    "desk lamp": ("light", "switch", "base"),
    "running shoes": ("sole", "lacing", "fit"),
    "blender": ("motor", "blade", "jug"),
    "office chair": ("cushion", "armrest", "wheel"),
    "board game": ("rulebook", "artwork", "box"),
    "water bottle": ("lid", "seal", "straw"),
    "keyboard": ("spacebar", "cable", "backlight"),
    "tent": ("frame", "zip", "groundsheet"),
    "vacuum cleaner": ("suction", "filter", "hose"),
    "umbrella": ("canopy", "handle", "frame"),
    "kettle": ("spout", "handle", "switch"),
    "camera": ("lens", "autofocus", "battery"),
}
pos = [
    "The {p} is excellent and the {a} works perfectly.",
    "I love this {p}; the {a} is great.",
    "Fantastic {p}, the {a} exceeded my expectations.",
    "Great value: the {a} is solid and I would buy this {p} again.",
    "This {p} is wonderful, and the {a} is a joy to use.",
    "Really happy with the {p}. The {a} is superb.",
    "Best {p} I have owned; the {a} is brilliant.",
    "The {a} on this {p} is fantastic. Highly recommended.",
]
neg = [
    "The {p} broke after a week and the {a} is useless.",
    "I hate this {p}; the {a} is awful.",
    "Terrible {p}, the {a} failed on day two.",
    "Poor value: the {a} is flimsy and I regret buying this {p}.",
    "This {p} is a disappointment, and the {a} is cheap.",
    "Really unhappy with the {p}. The {a} is broken.",
    "Worst {p} I have owned; the {a} is a mess.",
    "The {a} on this {p} is awful. Avoid it.",
]
rows = []
for p, aspects in products.items():
    for label, templates in (("positive", pos), ("negative", neg)):
        for tpl in rng.sample(templates, 4):
            rows.append({"review": tpl.format(p=p, a=rng.choice(aspects)), "label": label, "product": p})
rng.shuffle(rows)
# three malformed rows, on purpose: validation must report them
rows.insert(17, {"review": "", "label": "positive", "product": "kettle"})
rows.insert(42, {"review": "It arrived on a Tuesday in a brown box.", "label": "neutral", "product": "tent"})
rows.insert(88, {"review": "Does exactly what it says, love it.", "label": "", "product": "umbrella"})
with open(Path(__file__).with_name("reviews.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["review", "label", "product"])
    w.writeheader()
    w.writerows(rows)
print(f"wrote {len(rows)} rows")
