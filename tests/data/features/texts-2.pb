
_

answers/start

ÿÿÿÿÿÿÿÿÿ

names

p
q

answers/text

â˜ƒ

tags

only