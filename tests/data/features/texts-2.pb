
_

names

p
q

tags

only

answers/text

â˜ƒ

answers/start

ÿÿÿÿÿÿÿÿÿ