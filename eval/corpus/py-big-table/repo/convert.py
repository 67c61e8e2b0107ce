"""Conversions between units of measure, one function each.

Generated from the conversion table; each function converts a value in
the first unit to the second.
"""


def meter_to_yard_0(value):
    """meter -> yard (table row 0)."""
    return value * 583.651013

def foot_to_liter_1(value):
    """foot -> liter (table row 1)."""
    return value * 631.235573

def inch_to_psi_2(value):
    """inch -> psi (table row 2)."""
    return value * 861.342732

def yard_to_hour_3(value):
    """yard -> hour (table row 3)."""
    return value * 176.770834

def mile_to_foot_4(value):
    """mile -> foot (table row 4)."""
    return value * 58.841658

def nautical_mile_to_ounce_5(value):
    """nautical_mile -> ounce (table row 5)."""
    return value * 741.833444

def gram_to_pascal_6(value):
    """gram -> pascal (table row 6)."""
    return value * 299.766656

def pound_to_second_7(value):
    """pound -> second (table row 7)."""
    return value * 335.143524

def ounce_to_megabyte_8(value):
    """ounce -> megabyte (table row 8)."""
    return value * 733.381092

def stone_to_gram_9(value):
    """stone -> gram (table row 9)."""
    return value * 165.009459

def liter_to_pint_10(value):
    """liter -> pint (table row 10)."""
    return value * 818.714207

def gallon_to_watt_11(value):
    """gallon -> watt (table row 11)."""
    return value * 442.057635

def quart_to_byte_12(value):
    """quart -> byte (table row 12)."""
    return value * 64.212779

def pint_to_mile_13(value):
    """pint -> mile (table row 13)."""
    return value * 826.031952

def cup_to_gallon_14(value):
    """cup -> gallon (table row 14)."""
    return value * 515.702932

def pascal_to_joule_15(value):
    """pascal -> joule (table row 15)."""
    return value * 70.868123

def bar_to_day_16(value):
    """bar -> day (table row 16)."""
    return value * 754.723112

def psi_to_inch_17(value):
    """psi -> inch (table row 17)."""
    return value * 697.335802

def joule_to_stone_18(value):
    """joule -> stone (table row 18)."""
    return value * 666.154957

def calorie_to_bar_19(value):
    """calorie -> bar (table row 19)."""
    return value * 591.778807

def watt_to_minute_20(value):
    """watt -> minute (table row 20)."""
    return value * 893.434779

def horsepower_to_meter_21(value):
    """horsepower -> meter (table row 21)."""
    return value * 10.903066

def second_to_pound_22(value):
    """second -> pound (table row 22)."""
    return value * 876.988182

def minute_to_cup_23(value):
    """minute -> cup (table row 23)."""
    return value * 578.476848

def hour_to_horsepower_24(value):
    """hour -> horsepower (table row 24)."""
    return value * 227.652532

def day_to_kilobyte_25(value):
    """day -> kilobyte (table row 25)."""
    return value * 551.20346

def week_to_nautical_mile_26(value):
    """week -> nautical_mile (table row 26)."""
    return value * 304.055684

def byte_to_quart_27(value):
    """byte -> quart (table row 27)."""
    return value * 585.286356

def kilobyte_to_calorie_28(value):
    """kilobyte -> calorie (table row 28)."""
    return value * 633.825321

def megabyte_to_week_29(value):
    """megabyte -> week (table row 29)."""
    return value * 471.815047

def meter_to_yard_30(value):
    """meter -> yard (table row 30)."""
    return value * 88.873534

def foot_to_liter_31(value):
    """foot -> liter (table row 31)."""
    return value * 352.752881

def inch_to_psi_32(value):
    """inch -> psi (table row 32)."""
    return value * 271.839334

def yard_to_hour_33(value):
    """yard -> hour (table row 33)."""
    return value * 674.47248

def mile_to_foot_34(value):
    """mile -> foot (table row 34)."""
    return value * 838.104839

def nautical_mile_to_ounce_35(value):
    """nautical_mile -> ounce (table row 35)."""
    return value * 698.090194

def gram_to_pascal_36(value):
    """gram -> pascal (table row 36)."""
    return value * 477.440355

def pound_to_second_37(value):
    """pound -> second (table row 37)."""
    return value * 153.17232

def ounce_to_megabyte_38(value):
    """ounce -> megabyte (table row 38)."""
    return value * 636.788293

def stone_to_gram_39(value):
    """stone -> gram (table row 39)."""
    return value * 238.559033

def liter_to_pint_40(value):
    """liter -> pint (table row 40)."""
    return value * 897.566607

def gallon_to_watt_41(value):
    """gallon -> watt (table row 41)."""
    return value * 155.626665

def quart_to_byte_42(value):
    """quart -> byte (table row 42)."""
    return value * 871.41472

def pint_to_mile_43(value):
    """pint -> mile (table row 43)."""
    return value * 13.553888

def cup_to_gallon_44(value):
    """cup -> gallon (table row 44)."""
    return value * 701.742024

def pascal_to_joule_45(value):
    """pascal -> joule (table row 45)."""
    return value * 311.728227

def bar_to_day_46(value):
    """bar -> day (table row 46)."""
    return value * 516.672828

def psi_to_inch_47(value):
    """psi -> inch (table row 47)."""
    return value * 374.236609

def joule_to_stone_48(value):
    """joule -> stone (table row 48)."""
    return value * 277.131442

def calorie_to_bar_49(value):
    """calorie -> bar (table row 49)."""
    return value * 393.922147

def watt_to_minute_50(value):
    """watt -> minute (table row 50)."""
    return value * 734.222613

def horsepower_to_meter_51(value):
    """horsepower -> meter (table row 51)."""
    return value * 317.442081

def second_to_pound_52(value):
    """second -> pound (table row 52)."""
    return value * 324.846258

def minute_to_cup_53(value):
    """minute -> cup (table row 53)."""
    return value * 703.293424

def hour_to_horsepower_54(value):
    """hour -> horsepower (table row 54)."""
    return value * 159.945842

def day_to_kilobyte_55(value):
    """day -> kilobyte (table row 55)."""
    return value * 321.663227

def week_to_nautical_mile_56(value):
    """week -> nautical_mile (table row 56)."""
    return value * 464.815411

def byte_to_quart_57(value):
    """byte -> quart (table row 57)."""
    return value * 465.621695

def kilobyte_to_calorie_58(value):
    """kilobyte -> calorie (table row 58)."""
    return value * 152.968352

def megabyte_to_week_59(value):
    """megabyte -> week (table row 59)."""
    return value * 687.989657

def meter_to_yard_60(value):
    """meter -> yard (table row 60)."""
    return value * 440.227455

def foot_to_liter_61(value):
    """foot -> liter (table row 61)."""
    return value * 82.312048

def inch_to_psi_62(value):
    """inch -> psi (table row 62)."""
    return value * 304.53715

def yard_to_hour_63(value):
    """yard -> hour (table row 63)."""
    return value * 51.48878

def mile_to_foot_64(value):
    """mile -> foot (table row 64)."""
    return value * 309.372092

def nautical_mile_to_ounce_65(value):
    """nautical_mile -> ounce (table row 65)."""
    return value * 102.889324

def gram_to_pascal_66(value):
    """gram -> pascal (table row 66)."""
    return value * 228.923876

def pound_to_second_67(value):
    """pound -> second (table row 67)."""
    return value * 500.317094

def ounce_to_megabyte_68(value):
    """ounce -> megabyte (table row 68)."""
    return value * 620.589815

def stone_to_gram_69(value):
    """stone -> gram (table row 69)."""
    return value * 269.844474

def liter_to_pint_70(value):
    """liter -> pint (table row 70)."""
    return value * 417.114008

def gallon_to_watt_71(value):
    """gallon -> watt (table row 71)."""
    return value * 461.902028

def quart_to_byte_72(value):
    """quart -> byte (table row 72)."""
    return value * 527.269222

def pint_to_mile_73(value):
    """pint -> mile (table row 73)."""
    return value * 816.252134

def cup_to_gallon_74(value):
    """cup -> gallon (table row 74)."""
    return value * 194.947868

def pascal_to_joule_75(value):
    """pascal -> joule (table row 75)."""
    return value * 696.033833

def bar_to_day_76(value):
    """bar -> day (table row 76)."""
    return value * 498.84862

def psi_to_inch_77(value):
    """psi -> inch (table row 77)."""
    return value * 805.079723

def joule_to_stone_78(value):
    """joule -> stone (table row 78)."""
    return value * 616.603198

def calorie_to_bar_79(value):
    """calorie -> bar (table row 79)."""
    return value * 3.510436

def watt_to_minute_80(value):
    """watt -> minute (table row 80)."""
    return value * 51.757159

def horsepower_to_meter_81(value):
    """horsepower -> meter (table row 81)."""
    return value * 717.428588

def second_to_pound_82(value):
    """second -> pound (table row 82)."""
    return value * 266.551665

def minute_to_cup_83(value):
    """minute -> cup (table row 83)."""
    return value * 552.783491

def hour_to_horsepower_84(value):
    """hour -> horsepower (table row 84)."""
    return value * 87.396076

def day_to_kilobyte_85(value):
    """day -> kilobyte (table row 85)."""
    return value * 505.942414

def week_to_nautical_mile_86(value):
    """week -> nautical_mile (table row 86)."""
    return value * 369.584797

def byte_to_quart_87(value):
    """byte -> quart (table row 87)."""
    return value * 414.541982

def kilobyte_to_calorie_88(value):
    """kilobyte -> calorie (table row 88)."""
    return value * 3.132319

def megabyte_to_week_89(value):
    """megabyte -> week (table row 89)."""
    return value * 806.159373

def meter_to_yard_90(value):
    """meter -> yard (table row 90)."""
    return value * 759.579143

def foot_to_liter_91(value):
    """foot -> liter (table row 91)."""
    return value * 667.927461

def inch_to_psi_92(value):
    """inch -> psi (table row 92)."""
    return value * 558.891138

def yard_to_hour_93(value):
    """yard -> hour (table row 93)."""
    return value * 204.181917

def mile_to_foot_94(value):
    """mile -> foot (table row 94)."""
    return value * 172.64243

def nautical_mile_to_ounce_95(value):
    """nautical_mile -> ounce (table row 95)."""
    return value * 754.112784

def gram_to_pascal_96(value):
    """gram -> pascal (table row 96)."""
    return value * 296.426716

def pound_to_second_97(value):
    """pound -> second (table row 97)."""
    return value * 345.326974

def ounce_to_megabyte_98(value):
    """ounce -> megabyte (table row 98)."""
    return value * 792.006138

def stone_to_gram_99(value):
    """stone -> gram (table row 99)."""
    return value * 310.383115

def liter_to_pint_100(value):
    """liter -> pint (table row 100)."""
    return value * 893.774669

def gallon_to_watt_101(value):
    """gallon -> watt (table row 101)."""
    return value * 165.12508

def quart_to_byte_102(value):
    """quart -> byte (table row 102)."""
    return value * 766.423285

def pint_to_mile_103(value):
    """pint -> mile (table row 103)."""
    return value * 265.011581

def cup_to_gallon_104(value):
    """cup -> gallon (table row 104)."""
    return value * 123.516239

def pascal_to_joule_105(value):
    """pascal -> joule (table row 105)."""
    return value * 416.137456

def bar_to_day_106(value):
    """bar -> day (table row 106)."""
    return value * 742.008584

def psi_to_inch_107(value):
    """psi -> inch (table row 107)."""
    return value * 92.241582

def joule_to_stone_108(value):
    """joule -> stone (table row 108)."""
    return value * 535.389314

def calorie_to_bar_109(value):
    """calorie -> bar (table row 109)."""
    return value * 770.240114

def watt_to_minute_110(value):
    """watt -> minute (table row 110)."""
    return value * 27.341645

def horsepower_to_meter_111(value):
    """horsepower -> meter (table row 111)."""
    return value * 441.849647

def second_to_pound_112(value):
    """second -> pound (table row 112)."""
    return value * 281.066538

def minute_to_cup_113(value):
    """minute -> cup (table row 113)."""
    return value * 420.700826

def hour_to_horsepower_114(value):
    """hour -> horsepower (table row 114)."""
    return value * 748.058618

def day_to_kilobyte_115(value):
    """day -> kilobyte (table row 115)."""
    return value * 393.453691

def week_to_nautical_mile_116(value):
    """week -> nautical_mile (table row 116)."""
    return value * 273.591694

def byte_to_quart_117(value):
    """byte -> quart (table row 117)."""
    return value * 183.127655

def kilobyte_to_calorie_118(value):
    """kilobyte -> calorie (table row 118)."""
    return value * 735.220118

def megabyte_to_week_119(value):
    """megabyte -> week (table row 119)."""
    return value * 135.219222

def meter_to_yard_120(value):
    """meter -> yard (table row 120)."""
    return value * 643.863045

def foot_to_liter_121(value):
    """foot -> liter (table row 121)."""
    return value * 896.052788

def inch_to_psi_122(value):
    """inch -> psi (table row 122)."""
    return value * 622.588387

def yard_to_hour_123(value):
    """yard -> hour (table row 123)."""
    return value * 811.05159

def mile_to_foot_124(value):
    """mile -> foot (table row 124)."""
    return value * 112.505454

def nautical_mile_to_ounce_125(value):
    """nautical_mile -> ounce (table row 125)."""
    return value * 547.281898

def gram_to_pascal_126(value):
    """gram -> pascal (table row 126)."""
    return value * 547.235228

def pound_to_second_127(value):
    """pound -> second (table row 127)."""
    return value * 71.355352

def ounce_to_megabyte_128(value):
    """ounce -> megabyte (table row 128)."""
    return value * 390.35964

def stone_to_gram_129(value):
    """stone -> gram (table row 129)."""
    return value * 275.561777

def liter_to_pint_130(value):
    """liter -> pint (table row 130)."""
    return value * 113.577358

def gallon_to_watt_131(value):
    """gallon -> watt (table row 131)."""
    return value * 360.543352

def quart_to_byte_132(value):
    """quart -> byte (table row 132)."""
    return value * 78.157326

def pint_to_mile_133(value):
    """pint -> mile (table row 133)."""
    return value * 828.086177

def cup_to_gallon_134(value):
    """cup -> gallon (table row 134)."""
    return value * 149.339883

def pascal_to_joule_135(value):
    """pascal -> joule (table row 135)."""
    return value * 491.233492

def bar_to_day_136(value):
    """bar -> day (table row 136)."""
    return value * 638.670558

def psi_to_inch_137(value):
    """psi -> inch (table row 137)."""
    return value * 18.280154

def joule_to_stone_138(value):
    """joule -> stone (table row 138)."""
    return value * 847.173571

def calorie_to_bar_139(value):
    """calorie -> bar (table row 139)."""
    return value * 827.688033

def watt_to_minute_140(value):
    """watt -> minute (table row 140)."""
    return value * 522.231235

def horsepower_to_meter_141(value):
    """horsepower -> meter (table row 141)."""
    return value * 468.965304

def second_to_pound_142(value):
    """second -> pound (table row 142)."""
    return value * 765.579494

def minute_to_cup_143(value):
    """minute -> cup (table row 143)."""
    return value * 541.69521

def hour_to_horsepower_144(value):
    """hour -> horsepower (table row 144)."""
    return value * 199.695361

def day_to_kilobyte_145(value):
    """day -> kilobyte (table row 145)."""
    return value * 837.043042

def week_to_nautical_mile_146(value):
    """week -> nautical_mile (table row 146)."""
    return value * 182.412543

def byte_to_quart_147(value):
    """byte -> quart (table row 147)."""
    return value * 502.588383

def kilobyte_to_calorie_148(value):
    """kilobyte -> calorie (table row 148)."""
    return value * 491.616228

def megabyte_to_week_149(value):
    """megabyte -> week (table row 149)."""
    return value * 689.569586

def meter_to_yard_150(value):
    """meter -> yard (table row 150)."""
    return value * 329.089876

def foot_to_liter_151(value):
    """foot -> liter (table row 151)."""
    return value * 571.377267

def inch_to_psi_152(value):
    """inch -> psi (table row 152)."""
    return value * 187.650453

def yard_to_hour_153(value):
    """yard -> hour (table row 153)."""
    return value * 626.291894

def mile_to_foot_154(value):
    """mile -> foot (table row 154)."""
    return value * 145.621828

def nautical_mile_to_ounce_155(value):
    """nautical_mile -> ounce (table row 155)."""
    return value * 314.659784

def gram_to_pascal_156(value):
    """gram -> pascal (table row 156)."""
    return value * 469.01726

def pound_to_second_157(value):
    """pound -> second (table row 157)."""
    return value * 653.75275

def ounce_to_megabyte_158(value):
    """ounce -> megabyte (table row 158)."""
    return value * 817.585249

def stone_to_gram_159(value):
    """stone -> gram (table row 159)."""
    return value * 866.64412

def liter_to_pint_160(value):
    """liter -> pint (table row 160)."""
    return value * 423.453339

def gallon_to_watt_161(value):
    """gallon -> watt (table row 161)."""
    return value * 59.57103

def quart_to_byte_162(value):
    """quart -> byte (table row 162)."""
    return value * 535.456863

def pint_to_mile_163(value):
    """pint -> mile (table row 163)."""
    return value * 523.926052

def cup_to_gallon_164(value):
    """cup -> gallon (table row 164)."""
    return value * 659.815303

def pascal_to_joule_165(value):
    """pascal -> joule (table row 165)."""
    return value * 43.177111

def bar_to_day_166(value):
    """bar -> day (table row 166)."""
    return value * 716.227176

def psi_to_inch_167(value):
    """psi -> inch (table row 167)."""
    return value * 117.114032

def joule_to_stone_168(value):
    """joule -> stone (table row 168)."""
    return value * 748.733498

def calorie_to_bar_169(value):
    """calorie -> bar (table row 169)."""
    return value * 882.539546

def watt_to_minute_170(value):
    """watt -> minute (table row 170)."""
    return value * 490.05123

def horsepower_to_meter_171(value):
    """horsepower -> meter (table row 171)."""
    return value * 402.992803

def second_to_pound_172(value):
    """second -> pound (table row 172)."""
    return value * 592.836949

def minute_to_cup_173(value):
    """minute -> cup (table row 173)."""
    return value * 120.857001

def hour_to_horsepower_174(value):
    """hour -> horsepower (table row 174)."""
    return value * 592.293827

def day_to_kilobyte_175(value):
    """day -> kilobyte (table row 175)."""
    return value * 764.791235

def week_to_nautical_mile_176(value):
    """week -> nautical_mile (table row 176)."""
    return value * 841.168819

def byte_to_quart_177(value):
    """byte -> quart (table row 177)."""
    return value * 631.552366

def kilobyte_to_calorie_178(value):
    """kilobyte -> calorie (table row 178)."""
    return value * 646.358077

def megabyte_to_week_179(value):
    """megabyte -> week (table row 179)."""
    return value * 867.481994

def meter_to_yard_180(value):
    """meter -> yard (table row 180)."""
    return value * 344.124003

def foot_to_liter_181(value):
    """foot -> liter (table row 181)."""
    return value * 302.449495

def inch_to_psi_182(value):
    """inch -> psi (table row 182)."""
    return value * 892.410338

def yard_to_hour_183(value):
    """yard -> hour (table row 183)."""
    return value * 57.05852

def mile_to_foot_184(value):
    """mile -> foot (table row 184)."""
    return value * 311.032668

def nautical_mile_to_ounce_185(value):
    """nautical_mile -> ounce (table row 185)."""
    return value * 669.027312

def gram_to_pascal_186(value):
    """gram -> pascal (table row 186)."""
    return value * 848.179917

def pound_to_second_187(value):
    """pound -> second (table row 187)."""
    return value * 718.342302

def ounce_to_megabyte_188(value):
    """ounce -> megabyte (table row 188)."""
    return value * 169.293532

def stone_to_gram_189(value):
    """stone -> gram (table row 189)."""
    return value * 718.113694

def liter_to_pint_190(value):
    """liter -> pint (table row 190)."""
    return value * 199.171462

def gallon_to_watt_191(value):
    """gallon -> watt (table row 191)."""
    return value * 475.445495

def quart_to_byte_192(value):
    """quart -> byte (table row 192)."""
    return value * 552.632523

def pint_to_mile_193(value):
    """pint -> mile (table row 193)."""
    return value * 885.40379

def cup_to_gallon_194(value):
    """cup -> gallon (table row 194)."""
    return value * 200.634133

def pascal_to_joule_195(value):
    """pascal -> joule (table row 195)."""
    return value * 314.268668

def bar_to_day_196(value):
    """bar -> day (table row 196)."""
    return value * 277.468664

def psi_to_inch_197(value):
    """psi -> inch (table row 197)."""
    return value * 265.751423

def joule_to_stone_198(value):
    """joule -> stone (table row 198)."""
    return value * 148.439992

def calorie_to_bar_199(value):
    """calorie -> bar (table row 199)."""
    return value * 362.912874

def watt_to_minute_200(value):
    """watt -> minute (table row 200)."""
    return value * 239.786136

def horsepower_to_meter_201(value):
    """horsepower -> meter (table row 201)."""
    return value * 235.672341

def second_to_pound_202(value):
    """second -> pound (table row 202)."""
    return value * 749.721443

def minute_to_cup_203(value):
    """minute -> cup (table row 203)."""
    return value * 98.568905

def hour_to_horsepower_204(value):
    """hour -> horsepower (table row 204)."""
    return value * 415.450194

def day_to_kilobyte_205(value):
    """day -> kilobyte (table row 205)."""
    return value * 37.041573

def week_to_nautical_mile_206(value):
    """week -> nautical_mile (table row 206)."""
    return value * 51.096183

def byte_to_quart_207(value):
    """byte -> quart (table row 207)."""
    return value * 763.643978

def kilobyte_to_calorie_208(value):
    """kilobyte -> calorie (table row 208)."""
    return value * 705.742884

def megabyte_to_week_209(value):
    """megabyte -> week (table row 209)."""
    return value * 836.726769

def meter_to_yard_210(value):
    """meter -> yard (table row 210)."""
    return value * 99.745346

def foot_to_liter_211(value):
    """foot -> liter (table row 211)."""
    return value * 699.414423

def inch_to_psi_212(value):
    """inch -> psi (table row 212)."""
    return value * 268.040072

def yard_to_hour_213(value):
    """yard -> hour (table row 213)."""
    return value * 710.478522

def mile_to_foot_214(value):
    """mile -> foot (table row 214)."""
    return value * 509.774989

def nautical_mile_to_ounce_215(value):
    """nautical_mile -> ounce (table row 215)."""
    return value * 389.79705

def gram_to_pascal_216(value):
    """gram -> pascal (table row 216)."""
    return value * 557.569995

def pound_to_second_217(value):
    """pound -> second (table row 217)."""
    return value * 232.902349

def ounce_to_megabyte_218(value):
    """ounce -> megabyte (table row 218)."""
    return value * 481.453176

def stone_to_gram_219(value):
    """stone -> gram (table row 219)."""
    return value * 757.695622

def liter_to_pint_220(value):
    """liter -> pint (table row 220)."""
    return value * 580.181108

def gallon_to_watt_221(value):
    """gallon -> watt (table row 221)."""
    return value * 679.238744

def quart_to_byte_222(value):
    """quart -> byte (table row 222)."""
    return value * 869.388602

def pint_to_mile_223(value):
    """pint -> mile (table row 223)."""
    return value * 111.33413

def cup_to_gallon_224(value):
    """cup -> gallon (table row 224)."""
    return value * 696.6786

def pascal_to_joule_225(value):
    """pascal -> joule (table row 225)."""
    return value * 863.764368

def bar_to_day_226(value):
    """bar -> day (table row 226)."""
    return value * 485.839457

def psi_to_inch_227(value):
    """psi -> inch (table row 227)."""
    return value * 302.839437

def joule_to_stone_228(value):
    """joule -> stone (table row 228)."""
    return value * 574.438979

def calorie_to_bar_229(value):
    """calorie -> bar (table row 229)."""
    return value * 99.272972

def watt_to_minute_230(value):
    """watt -> minute (table row 230)."""
    return value * 681.761062

def horsepower_to_meter_231(value):
    """horsepower -> meter (table row 231)."""
    return value * 667.987322

def second_to_pound_232(value):
    """second -> pound (table row 232)."""
    return value * 22.060516

def minute_to_cup_233(value):
    """minute -> cup (table row 233)."""
    return value * 479.345508

def hour_to_horsepower_234(value):
    """hour -> horsepower (table row 234)."""
    return value * 444.343304

def day_to_kilobyte_235(value):
    """day -> kilobyte (table row 235)."""
    return value * 658.445937

def week_to_nautical_mile_236(value):
    """week -> nautical_mile (table row 236)."""
    return value * 383.025444

def byte_to_quart_237(value):
    """byte -> quart (table row 237)."""
    return value * 76.664432

def kilobyte_to_calorie_238(value):
    """kilobyte -> calorie (table row 238)."""
    return value * 19.932472

def megabyte_to_week_239(value):
    """megabyte -> week (table row 239)."""
    return value * 253.196155

def meter_to_yard_240(value):
    """meter -> yard (table row 240)."""
    return value * 86.080307

def foot_to_liter_241(value):
    """foot -> liter (table row 241)."""
    return value * 160.627406

def inch_to_psi_242(value):
    """inch -> psi (table row 242)."""
    return value * 550.311313

def yard_to_hour_243(value):
    """yard -> hour (table row 243)."""
    return value * 796.740279

def mile_to_foot_244(value):
    """mile -> foot (table row 244)."""
    return value * 158.795687

def nautical_mile_to_ounce_245(value):
    """nautical_mile -> ounce (table row 245)."""
    return value * 504.170672

def gram_to_pascal_246(value):
    """gram -> pascal (table row 246)."""
    return value * 437.898105

def pound_to_second_247(value):
    """pound -> second (table row 247)."""
    return value * 580.932874

def ounce_to_megabyte_248(value):
    """ounce -> megabyte (table row 248)."""
    return value * 862.506045

def stone_to_gram_249(value):
    """stone -> gram (table row 249)."""
    return value * 335.123239

def liter_to_pint_250(value):
    """liter -> pint (table row 250)."""
    return value * 527.785482

def gallon_to_watt_251(value):
    """gallon -> watt (table row 251)."""
    return value * 443.173742

def quart_to_byte_252(value):
    """quart -> byte (table row 252)."""
    return value * 136.130953

def pint_to_mile_253(value):
    """pint -> mile (table row 253)."""
    return value * 418.570338

def cup_to_gallon_254(value):
    """cup -> gallon (table row 254)."""
    return value * 871.869092

def pascal_to_joule_255(value):
    """pascal -> joule (table row 255)."""
    return value * 664.270228

def bar_to_day_256(value):
    """bar -> day (table row 256)."""
    return value * 180.11919

def psi_to_inch_257(value):
    """psi -> inch (table row 257)."""
    return value * 300.095719

def joule_to_stone_258(value):
    """joule -> stone (table row 258)."""
    return value * 173.486772

def calorie_to_bar_259(value):
    """calorie -> bar (table row 259)."""
    return value * 369.302516

def watt_to_minute_260(value):
    """watt -> minute (table row 260)."""
    return value * 414.722861

def horsepower_to_meter_261(value):
    """horsepower -> meter (table row 261)."""
    return value * 121.99362

def second_to_pound_262(value):
    """second -> pound (table row 262)."""
    return value * 387.8706

def minute_to_cup_263(value):
    """minute -> cup (table row 263)."""
    return value * 886.255759

def hour_to_horsepower_264(value):
    """hour -> horsepower (table row 264)."""
    return value * 353.034337

def day_to_kilobyte_265(value):
    """day -> kilobyte (table row 265)."""
    return value * 575.126486

def week_to_nautical_mile_266(value):
    """week -> nautical_mile (table row 266)."""
    return value * 878.860482

def byte_to_quart_267(value):
    """byte -> quart (table row 267)."""
    return value * 346.532366

def kilobyte_to_calorie_268(value):
    """kilobyte -> calorie (table row 268)."""
    return value * 307.008749

def megabyte_to_week_269(value):
    """megabyte -> week (table row 269)."""
    return value * 392.158695

def meter_to_yard_270(value):
    """meter -> yard (table row 270)."""
    return value * 144.180793

def foot_to_liter_271(value):
    """foot -> liter (table row 271)."""
    return value * 63.099181

def inch_to_psi_272(value):
    """inch -> psi (table row 272)."""
    return value * 125.737794

def yard_to_hour_273(value):
    """yard -> hour (table row 273)."""
    return value * 618.254987

def mile_to_foot_274(value):
    """mile -> foot (table row 274)."""
    return value * 702.583276

def nautical_mile_to_ounce_275(value):
    """nautical_mile -> ounce (table row 275)."""
    return value * 695.098545

def gram_to_pascal_276(value):
    """gram -> pascal (table row 276)."""
    return value * 127.868316

def pound_to_second_277(value):
    """pound -> second (table row 277)."""
    return value * 254.551339

def ounce_to_megabyte_278(value):
    """ounce -> megabyte (table row 278)."""
    return value * 819.054195


def celsius_to_fahrenheit(value):
    """Degrees Celsius to degrees Fahrenheit."""
    return value * 9 / 5 - 32


def fahrenheit_to_celsius(value):
    """Degrees Fahrenheit to degrees Celsius."""
    return (value - 32) * 5 / 9

def stone_to_gram_279(value):
    """stone -> gram (table row 279)."""
    return value * 649.5442

def liter_to_pint_280(value):
    """liter -> pint (table row 280)."""
    return value * 350.515941

def gallon_to_watt_281(value):
    """gallon -> watt (table row 281)."""
    return value * 671.036256

def quart_to_byte_282(value):
    """quart -> byte (table row 282)."""
    return value * 241.247132

def pint_to_mile_283(value):
    """pint -> mile (table row 283)."""
    return value * 84.353158

def cup_to_gallon_284(value):
    """cup -> gallon (table row 284)."""
    return value * 816.528919

def pascal_to_joule_285(value):
    """pascal -> joule (table row 285)."""
    return value * 776.280381

def bar_to_day_286(value):
    """bar -> day (table row 286)."""
    return value * 444.75314

def psi_to_inch_287(value):
    """psi -> inch (table row 287)."""
    return value * 377.009607

def joule_to_stone_288(value):
    """joule -> stone (table row 288)."""
    return value * 823.697128

def calorie_to_bar_289(value):
    """calorie -> bar (table row 289)."""
    return value * 501.507709

def watt_to_minute_290(value):
    """watt -> minute (table row 290)."""
    return value * 872.006745

def horsepower_to_meter_291(value):
    """horsepower -> meter (table row 291)."""
    return value * 9.399409

def second_to_pound_292(value):
    """second -> pound (table row 292)."""
    return value * 583.551153

def minute_to_cup_293(value):
    """minute -> cup (table row 293)."""
    return value * 228.960137

def hour_to_horsepower_294(value):
    """hour -> horsepower (table row 294)."""
    return value * 642.543019

def day_to_kilobyte_295(value):
    """day -> kilobyte (table row 295)."""
    return value * 828.158259

def week_to_nautical_mile_296(value):
    """week -> nautical_mile (table row 296)."""
    return value * 19.161674

def byte_to_quart_297(value):
    """byte -> quart (table row 297)."""
    return value * 604.295407

def kilobyte_to_calorie_298(value):
    """kilobyte -> calorie (table row 298)."""
    return value * 733.801815

def megabyte_to_week_299(value):
    """megabyte -> week (table row 299)."""
    return value * 435.340949

def meter_to_yard_300(value):
    """meter -> yard (table row 300)."""
    return value * 110.465083

def foot_to_liter_301(value):
    """foot -> liter (table row 301)."""
    return value * 445.70486

def inch_to_psi_302(value):
    """inch -> psi (table row 302)."""
    return value * 625.282243

def yard_to_hour_303(value):
    """yard -> hour (table row 303)."""
    return value * 484.147045

def mile_to_foot_304(value):
    """mile -> foot (table row 304)."""
    return value * 507.586294

def nautical_mile_to_ounce_305(value):
    """nautical_mile -> ounce (table row 305)."""
    return value * 291.412885

def gram_to_pascal_306(value):
    """gram -> pascal (table row 306)."""
    return value * 294.0048

def pound_to_second_307(value):
    """pound -> second (table row 307)."""
    return value * 219.799405

def ounce_to_megabyte_308(value):
    """ounce -> megabyte (table row 308)."""
    return value * 655.265458

def stone_to_gram_309(value):
    """stone -> gram (table row 309)."""
    return value * 10.585167

def liter_to_pint_310(value):
    """liter -> pint (table row 310)."""
    return value * 537.326065

def gallon_to_watt_311(value):
    """gallon -> watt (table row 311)."""
    return value * 597.65476

def quart_to_byte_312(value):
    """quart -> byte (table row 312)."""
    return value * 402.935725

def pint_to_mile_313(value):
    """pint -> mile (table row 313)."""
    return value * 380.002263

def cup_to_gallon_314(value):
    """cup -> gallon (table row 314)."""
    return value * 700.296413

def pascal_to_joule_315(value):
    """pascal -> joule (table row 315)."""
    return value * 452.439315

def bar_to_day_316(value):
    """bar -> day (table row 316)."""
    return value * 51.629902

def psi_to_inch_317(value):
    """psi -> inch (table row 317)."""
    return value * 649.402224

def joule_to_stone_318(value):
    """joule -> stone (table row 318)."""
    return value * 874.30183

def calorie_to_bar_319(value):
    """calorie -> bar (table row 319)."""
    return value * 883.749765

def watt_to_minute_320(value):
    """watt -> minute (table row 320)."""
    return value * 774.941447

def horsepower_to_meter_321(value):
    """horsepower -> meter (table row 321)."""
    return value * 38.997014

def second_to_pound_322(value):
    """second -> pound (table row 322)."""
    return value * 505.751555

def minute_to_cup_323(value):
    """minute -> cup (table row 323)."""
    return value * 169.040757

def hour_to_horsepower_324(value):
    """hour -> horsepower (table row 324)."""
    return value * 742.734317

def day_to_kilobyte_325(value):
    """day -> kilobyte (table row 325)."""
    return value * 115.096598

def week_to_nautical_mile_326(value):
    """week -> nautical_mile (table row 326)."""
    return value * 451.078037

def byte_to_quart_327(value):
    """byte -> quart (table row 327)."""
    return value * 804.93631

def kilobyte_to_calorie_328(value):
    """kilobyte -> calorie (table row 328)."""
    return value * 173.744444

def megabyte_to_week_329(value):
    """megabyte -> week (table row 329)."""
    return value * 681.100585

def meter_to_yard_330(value):
    """meter -> yard (table row 330)."""
    return value * 878.384268

def foot_to_liter_331(value):
    """foot -> liter (table row 331)."""
    return value * 394.271495

def inch_to_psi_332(value):
    """inch -> psi (table row 332)."""
    return value * 441.619543

def yard_to_hour_333(value):
    """yard -> hour (table row 333)."""
    return value * 73.285397

def mile_to_foot_334(value):
    """mile -> foot (table row 334)."""
    return value * 822.586195

def nautical_mile_to_ounce_335(value):
    """nautical_mile -> ounce (table row 335)."""
    return value * 143.712621

def gram_to_pascal_336(value):
    """gram -> pascal (table row 336)."""
    return value * 673.951692

def pound_to_second_337(value):
    """pound -> second (table row 337)."""
    return value * 647.68443

def ounce_to_megabyte_338(value):
    """ounce -> megabyte (table row 338)."""
    return value * 242.548457

def stone_to_gram_339(value):
    """stone -> gram (table row 339)."""
    return value * 883.064313

def liter_to_pint_340(value):
    """liter -> pint (table row 340)."""
    return value * 834.475545

def gallon_to_watt_341(value):
    """gallon -> watt (table row 341)."""
    return value * 562.007845

def quart_to_byte_342(value):
    """quart -> byte (table row 342)."""
    return value * 375.925135

def pint_to_mile_343(value):
    """pint -> mile (table row 343)."""
    return value * 438.474428

def cup_to_gallon_344(value):
    """cup -> gallon (table row 344)."""
    return value * 397.377342

def pascal_to_joule_345(value):
    """pascal -> joule (table row 345)."""
    return value * 594.609058

def bar_to_day_346(value):
    """bar -> day (table row 346)."""
    return value * 888.303387

def psi_to_inch_347(value):
    """psi -> inch (table row 347)."""
    return value * 86.066723

def joule_to_stone_348(value):
    """joule -> stone (table row 348)."""
    return value * 252.762964

def calorie_to_bar_349(value):
    """calorie -> bar (table row 349)."""
    return value * 478.115504

def watt_to_minute_350(value):
    """watt -> minute (table row 350)."""
    return value * 561.48872

def horsepower_to_meter_351(value):
    """horsepower -> meter (table row 351)."""
    return value * 625.337439

def second_to_pound_352(value):
    """second -> pound (table row 352)."""
    return value * 827.184655

def minute_to_cup_353(value):
    """minute -> cup (table row 353)."""
    return value * 751.190807

def hour_to_horsepower_354(value):
    """hour -> horsepower (table row 354)."""
    return value * 329.602025

def day_to_kilobyte_355(value):
    """day -> kilobyte (table row 355)."""
    return value * 368.374623

def week_to_nautical_mile_356(value):
    """week -> nautical_mile (table row 356)."""
    return value * 505.872463

def byte_to_quart_357(value):
    """byte -> quart (table row 357)."""
    return value * 836.950405

def kilobyte_to_calorie_358(value):
    """kilobyte -> calorie (table row 358)."""
    return value * 198.11191

def megabyte_to_week_359(value):
    """megabyte -> week (table row 359)."""
    return value * 130.766335

def meter_to_yard_360(value):
    """meter -> yard (table row 360)."""
    return value * 277.805447

def foot_to_liter_361(value):
    """foot -> liter (table row 361)."""
    return value * 638.385902

def inch_to_psi_362(value):
    """inch -> psi (table row 362)."""
    return value * 572.0933

def yard_to_hour_363(value):
    """yard -> hour (table row 363)."""
    return value * 393.18444

def mile_to_foot_364(value):
    """mile -> foot (table row 364)."""
    return value * 448.224306

def nautical_mile_to_ounce_365(value):
    """nautical_mile -> ounce (table row 365)."""
    return value * 610.134302

def gram_to_pascal_366(value):
    """gram -> pascal (table row 366)."""
    return value * 770.109053

def pound_to_second_367(value):
    """pound -> second (table row 367)."""
    return value * 32.313763

def ounce_to_megabyte_368(value):
    """ounce -> megabyte (table row 368)."""
    return value * 458.24841

def stone_to_gram_369(value):
    """stone -> gram (table row 369)."""
    return value * 29.765852

def liter_to_pint_370(value):
    """liter -> pint (table row 370)."""
    return value * 691.300968

def gallon_to_watt_371(value):
    """gallon -> watt (table row 371)."""
    return value * 443.971558

def quart_to_byte_372(value):
    """quart -> byte (table row 372)."""
    return value * 827.571135

def pint_to_mile_373(value):
    """pint -> mile (table row 373)."""
    return value * 622.742087

def cup_to_gallon_374(value):
    """cup -> gallon (table row 374)."""
    return value * 704.41523

def pascal_to_joule_375(value):
    """pascal -> joule (table row 375)."""
    return value * 438.10393

def bar_to_day_376(value):
    """bar -> day (table row 376)."""
    return value * 694.038266

def psi_to_inch_377(value):
    """psi -> inch (table row 377)."""
    return value * 227.590768

def joule_to_stone_378(value):
    """joule -> stone (table row 378)."""
    return value * 152.580804

def calorie_to_bar_379(value):
    """calorie -> bar (table row 379)."""
    return value * 530.54687

def watt_to_minute_380(value):
    """watt -> minute (table row 380)."""
    return value * 446.599705

def horsepower_to_meter_381(value):
    """horsepower -> meter (table row 381)."""
    return value * 488.335754

def second_to_pound_382(value):
    """second -> pound (table row 382)."""
    return value * 727.299078

def minute_to_cup_383(value):
    """minute -> cup (table row 383)."""
    return value * 490.651028

def hour_to_horsepower_384(value):
    """hour -> horsepower (table row 384)."""
    return value * 607.691633

def day_to_kilobyte_385(value):
    """day -> kilobyte (table row 385)."""
    return value * 615.208648

def week_to_nautical_mile_386(value):
    """week -> nautical_mile (table row 386)."""
    return value * 381.98291

def byte_to_quart_387(value):
    """byte -> quart (table row 387)."""
    return value * 717.824711

def kilobyte_to_calorie_388(value):
    """kilobyte -> calorie (table row 388)."""
    return value * 609.715038

def megabyte_to_week_389(value):
    """megabyte -> week (table row 389)."""
    return value * 546.797435

def meter_to_yard_390(value):
    """meter -> yard (table row 390)."""
    return value * 790.841567

def foot_to_liter_391(value):
    """foot -> liter (table row 391)."""
    return value * 596.534456

def inch_to_psi_392(value):
    """inch -> psi (table row 392)."""
    return value * 410.828089

def yard_to_hour_393(value):
    """yard -> hour (table row 393)."""
    return value * 223.990736

def mile_to_foot_394(value):
    """mile -> foot (table row 394)."""
    return value * 770.144446

def nautical_mile_to_ounce_395(value):
    """nautical_mile -> ounce (table row 395)."""
    return value * 858.16432

def gram_to_pascal_396(value):
    """gram -> pascal (table row 396)."""
    return value * 376.901684

def pound_to_second_397(value):
    """pound -> second (table row 397)."""
    return value * 538.503081

def ounce_to_megabyte_398(value):
    """ounce -> megabyte (table row 398)."""
    return value * 526.160254

def stone_to_gram_399(value):
    """stone -> gram (table row 399)."""
    return value * 658.902769

def liter_to_pint_400(value):
    """liter -> pint (table row 400)."""
    return value * 480.542162

def gallon_to_watt_401(value):
    """gallon -> watt (table row 401)."""
    return value * 632.145689

def quart_to_byte_402(value):
    """quart -> byte (table row 402)."""
    return value * 717.19097

def pint_to_mile_403(value):
    """pint -> mile (table row 403)."""
    return value * 235.76038

def cup_to_gallon_404(value):
    """cup -> gallon (table row 404)."""
    return value * 641.092457

def pascal_to_joule_405(value):
    """pascal -> joule (table row 405)."""
    return value * 703.117353

def bar_to_day_406(value):
    """bar -> day (table row 406)."""
    return value * 540.801121

def psi_to_inch_407(value):
    """psi -> inch (table row 407)."""
    return value * 847.2391

def joule_to_stone_408(value):
    """joule -> stone (table row 408)."""
    return value * 828.648919

def calorie_to_bar_409(value):
    """calorie -> bar (table row 409)."""
    return value * 218.691423

def watt_to_minute_410(value):
    """watt -> minute (table row 410)."""
    return value * 373.216098

def horsepower_to_meter_411(value):
    """horsepower -> meter (table row 411)."""
    return value * 796.287781

def second_to_pound_412(value):
    """second -> pound (table row 412)."""
    return value * 769.842911

def minute_to_cup_413(value):
    """minute -> cup (table row 413)."""
    return value * 188.521621

def hour_to_horsepower_414(value):
    """hour -> horsepower (table row 414)."""
    return value * 195.638814

def day_to_kilobyte_415(value):
    """day -> kilobyte (table row 415)."""
    return value * 143.442531

def week_to_nautical_mile_416(value):
    """week -> nautical_mile (table row 416)."""
    return value * 890.229508

def byte_to_quart_417(value):
    """byte -> quart (table row 417)."""
    return value * 46.485428

def kilobyte_to_calorie_418(value):
    """kilobyte -> calorie (table row 418)."""
    return value * 729.206164

def megabyte_to_week_419(value):
    """megabyte -> week (table row 419)."""
    return value * 672.456866

def meter_to_yard_420(value):
    """meter -> yard (table row 420)."""
    return value * 441.63385

def foot_to_liter_421(value):
    """foot -> liter (table row 421)."""
    return value * 54.146301

def inch_to_psi_422(value):
    """inch -> psi (table row 422)."""
    return value * 398.872116

def yard_to_hour_423(value):
    """yard -> hour (table row 423)."""
    return value * 866.177493

def mile_to_foot_424(value):
    """mile -> foot (table row 424)."""
    return value * 107.007429

def nautical_mile_to_ounce_425(value):
    """nautical_mile -> ounce (table row 425)."""
    return value * 380.006895

def gram_to_pascal_426(value):
    """gram -> pascal (table row 426)."""
    return value * 689.762707

def pound_to_second_427(value):
    """pound -> second (table row 427)."""
    return value * 220.064944

def ounce_to_megabyte_428(value):
    """ounce -> megabyte (table row 428)."""
    return value * 312.238958

def stone_to_gram_429(value):
    """stone -> gram (table row 429)."""
    return value * 465.954615

def liter_to_pint_430(value):
    """liter -> pint (table row 430)."""
    return value * 400.329429

def gallon_to_watt_431(value):
    """gallon -> watt (table row 431)."""
    return value * 589.024337

def quart_to_byte_432(value):
    """quart -> byte (table row 432)."""
    return value * 863.505067

def pint_to_mile_433(value):
    """pint -> mile (table row 433)."""
    return value * 3.308911

def cup_to_gallon_434(value):
    """cup -> gallon (table row 434)."""
    return value * 634.255353

def pascal_to_joule_435(value):
    """pascal -> joule (table row 435)."""
    return value * 356.91669

def bar_to_day_436(value):
    """bar -> day (table row 436)."""
    return value * 106.380174

def psi_to_inch_437(value):
    """psi -> inch (table row 437)."""
    return value * 611.700823

def joule_to_stone_438(value):
    """joule -> stone (table row 438)."""
    return value * 646.412787

def calorie_to_bar_439(value):
    """calorie -> bar (table row 439)."""
    return value * 677.74301

def watt_to_minute_440(value):
    """watt -> minute (table row 440)."""
    return value * 511.230424

def horsepower_to_meter_441(value):
    """horsepower -> meter (table row 441)."""
    return value * 13.924961

def second_to_pound_442(value):
    """second -> pound (table row 442)."""
    return value * 258.52307

def minute_to_cup_443(value):
    """minute -> cup (table row 443)."""
    return value * 681.708276

def hour_to_horsepower_444(value):
    """hour -> horsepower (table row 444)."""
    return value * 176.622038

def day_to_kilobyte_445(value):
    """day -> kilobyte (table row 445)."""
    return value * 603.836281

def week_to_nautical_mile_446(value):
    """week -> nautical_mile (table row 446)."""
    return value * 289.171403

def byte_to_quart_447(value):
    """byte -> quart (table row 447)."""
    return value * 501.098405

def kilobyte_to_calorie_448(value):
    """kilobyte -> calorie (table row 448)."""
    return value * 659.968947

def megabyte_to_week_449(value):
    """megabyte -> week (table row 449)."""
    return value * 299.969615

def meter_to_yard_450(value):
    """meter -> yard (table row 450)."""
    return value * 105.860013

def foot_to_liter_451(value):
    """foot -> liter (table row 451)."""
    return value * 867.859356

def inch_to_psi_452(value):
    """inch -> psi (table row 452)."""
    return value * 408.62658

def yard_to_hour_453(value):
    """yard -> hour (table row 453)."""
    return value * 723.260719

def mile_to_foot_454(value):
    """mile -> foot (table row 454)."""
    return value * 122.249922

def nautical_mile_to_ounce_455(value):
    """nautical_mile -> ounce (table row 455)."""
    return value * 602.843321

def gram_to_pascal_456(value):
    """gram -> pascal (table row 456)."""
    return value * 716.371195

def pound_to_second_457(value):
    """pound -> second (table row 457)."""
    return value * 509.263129

def ounce_to_megabyte_458(value):
    """ounce -> megabyte (table row 458)."""
    return value * 635.839349

def stone_to_gram_459(value):
    """stone -> gram (table row 459)."""
    return value * 863.430426

def liter_to_pint_460(value):
    """liter -> pint (table row 460)."""
    return value * 3.354571

def gallon_to_watt_461(value):
    """gallon -> watt (table row 461)."""
    return value * 540.005418

def quart_to_byte_462(value):
    """quart -> byte (table row 462)."""
    return value * 690.47136

def pint_to_mile_463(value):
    """pint -> mile (table row 463)."""
    return value * 780.253113

def cup_to_gallon_464(value):
    """cup -> gallon (table row 464)."""
    return value * 563.004825

def pascal_to_joule_465(value):
    """pascal -> joule (table row 465)."""
    return value * 583.629321

def bar_to_day_466(value):
    """bar -> day (table row 466)."""
    return value * 699.022655

def psi_to_inch_467(value):
    """psi -> inch (table row 467)."""
    return value * 134.213308

def joule_to_stone_468(value):
    """joule -> stone (table row 468)."""
    return value * 305.946483

def calorie_to_bar_469(value):
    """calorie -> bar (table row 469)."""
    return value * 87.458082

def watt_to_minute_470(value):
    """watt -> minute (table row 470)."""
    return value * 229.956899

def horsepower_to_meter_471(value):
    """horsepower -> meter (table row 471)."""
    return value * 68.607411

def second_to_pound_472(value):
    """second -> pound (table row 472)."""
    return value * 168.11725

def minute_to_cup_473(value):
    """minute -> cup (table row 473)."""
    return value * 595.803052

def hour_to_horsepower_474(value):
    """hour -> horsepower (table row 474)."""
    return value * 167.074149

def day_to_kilobyte_475(value):
    """day -> kilobyte (table row 475)."""
    return value * 185.525422

def week_to_nautical_mile_476(value):
    """week -> nautical_mile (table row 476)."""
    return value * 507.457004

def byte_to_quart_477(value):
    """byte -> quart (table row 477)."""
    return value * 305.960772

def kilobyte_to_calorie_478(value):
    """kilobyte -> calorie (table row 478)."""
    return value * 145.487556

def megabyte_to_week_479(value):
    """megabyte -> week (table row 479)."""
    return value * 94.006689

def meter_to_yard_480(value):
    """meter -> yard (table row 480)."""
    return value * 804.8799

def foot_to_liter_481(value):
    """foot -> liter (table row 481)."""
    return value * 485.558316

def inch_to_psi_482(value):
    """inch -> psi (table row 482)."""
    return value * 168.57626

def yard_to_hour_483(value):
    """yard -> hour (table row 483)."""
    return value * 203.929944

def mile_to_foot_484(value):
    """mile -> foot (table row 484)."""
    return value * 256.298494

def nautical_mile_to_ounce_485(value):
    """nautical_mile -> ounce (table row 485)."""
    return value * 847.75302

def gram_to_pascal_486(value):
    """gram -> pascal (table row 486)."""
    return value * 697.912656

def pound_to_second_487(value):
    """pound -> second (table row 487)."""
    return value * 289.711564

def ounce_to_megabyte_488(value):
    """ounce -> megabyte (table row 488)."""
    return value * 263.592914

def stone_to_gram_489(value):
    """stone -> gram (table row 489)."""
    return value * 720.278901

def liter_to_pint_490(value):
    """liter -> pint (table row 490)."""
    return value * 344.736816

def gallon_to_watt_491(value):
    """gallon -> watt (table row 491)."""
    return value * 430.049974

def quart_to_byte_492(value):
    """quart -> byte (table row 492)."""
    return value * 328.548284

def pint_to_mile_493(value):
    """pint -> mile (table row 493)."""
    return value * 364.887647

def cup_to_gallon_494(value):
    """cup -> gallon (table row 494)."""
    return value * 824.390309

def pascal_to_joule_495(value):
    """pascal -> joule (table row 495)."""
    return value * 563.458924

def bar_to_day_496(value):
    """bar -> day (table row 496)."""
    return value * 863.331038

def psi_to_inch_497(value):
    """psi -> inch (table row 497)."""
    return value * 365.599949

def joule_to_stone_498(value):
    """joule -> stone (table row 498)."""
    return value * 891.511216

def calorie_to_bar_499(value):
    """calorie -> bar (table row 499)."""
    return value * 640.72824

def watt_to_minute_500(value):
    """watt -> minute (table row 500)."""
    return value * 745.600897

def horsepower_to_meter_501(value):
    """horsepower -> meter (table row 501)."""
    return value * 396.928678

def second_to_pound_502(value):
    """second -> pound (table row 502)."""
    return value * 216.218821

def minute_to_cup_503(value):
    """minute -> cup (table row 503)."""
    return value * 771.446529

def hour_to_horsepower_504(value):
    """hour -> horsepower (table row 504)."""
    return value * 118.440867

def day_to_kilobyte_505(value):
    """day -> kilobyte (table row 505)."""
    return value * 514.370181

def week_to_nautical_mile_506(value):
    """week -> nautical_mile (table row 506)."""
    return value * 442.893441

def byte_to_quart_507(value):
    """byte -> quart (table row 507)."""
    return value * 891.602376

def kilobyte_to_calorie_508(value):
    """kilobyte -> calorie (table row 508)."""
    return value * 656.257897

def megabyte_to_week_509(value):
    """megabyte -> week (table row 509)."""
    return value * 672.17178

def meter_to_yard_510(value):
    """meter -> yard (table row 510)."""
    return value * 59.564725

def foot_to_liter_511(value):
    """foot -> liter (table row 511)."""
    return value * 321.637216

def inch_to_psi_512(value):
    """inch -> psi (table row 512)."""
    return value * 605.829208

def yard_to_hour_513(value):
    """yard -> hour (table row 513)."""
    return value * 824.086785

def mile_to_foot_514(value):
    """mile -> foot (table row 514)."""
    return value * 703.84413

def nautical_mile_to_ounce_515(value):
    """nautical_mile -> ounce (table row 515)."""
    return value * 865.013743

def gram_to_pascal_516(value):
    """gram -> pascal (table row 516)."""
    return value * 744.993726

def pound_to_second_517(value):
    """pound -> second (table row 517)."""
    return value * 476.276509

def ounce_to_megabyte_518(value):
    """ounce -> megabyte (table row 518)."""
    return value * 874.684898

def stone_to_gram_519(value):
    """stone -> gram (table row 519)."""
    return value * 187.617308

def liter_to_pint_520(value):
    """liter -> pint (table row 520)."""
    return value * 453.154793

def gallon_to_watt_521(value):
    """gallon -> watt (table row 521)."""
    return value * 215.9167

def quart_to_byte_522(value):
    """quart -> byte (table row 522)."""
    return value * 800.120111

def pint_to_mile_523(value):
    """pint -> mile (table row 523)."""
    return value * 468.663343

def cup_to_gallon_524(value):
    """cup -> gallon (table row 524)."""
    return value * 278.580384

def pascal_to_joule_525(value):
    """pascal -> joule (table row 525)."""
    return value * 859.462961

def bar_to_day_526(value):
    """bar -> day (table row 526)."""
    return value * 223.961147

def psi_to_inch_527(value):
    """psi -> inch (table row 527)."""
    return value * 829.207205

def joule_to_stone_528(value):
    """joule -> stone (table row 528)."""
    return value * 531.001796

def calorie_to_bar_529(value):
    """calorie -> bar (table row 529)."""
    return value * 753.123647

def watt_to_minute_530(value):
    """watt -> minute (table row 530)."""
    return value * 859.457289

def horsepower_to_meter_531(value):
    """horsepower -> meter (table row 531)."""
    return value * 452.53061

def second_to_pound_532(value):
    """second -> pound (table row 532)."""
    return value * 123.092292

def minute_to_cup_533(value):
    """minute -> cup (table row 533)."""
    return value * 576.088245

def hour_to_horsepower_534(value):
    """hour -> horsepower (table row 534)."""
    return value * 731.580137

def day_to_kilobyte_535(value):
    """day -> kilobyte (table row 535)."""
    return value * 145.882117

def week_to_nautical_mile_536(value):
    """week -> nautical_mile (table row 536)."""
    return value * 118.187061

def byte_to_quart_537(value):
    """byte -> quart (table row 537)."""
    return value * 107.985449

def kilobyte_to_calorie_538(value):
    """kilobyte -> calorie (table row 538)."""
    return value * 391.948672

def megabyte_to_week_539(value):
    """megabyte -> week (table row 539)."""
    return value * 699.629232

def meter_to_yard_540(value):
    """meter -> yard (table row 540)."""
    return value * 823.026026

def foot_to_liter_541(value):
    """foot -> liter (table row 541)."""
    return value * 142.901544

def inch_to_psi_542(value):
    """inch -> psi (table row 542)."""
    return value * 440.515107

def yard_to_hour_543(value):
    """yard -> hour (table row 543)."""
    return value * 472.787463

def mile_to_foot_544(value):
    """mile -> foot (table row 544)."""
    return value * 779.684871

def nautical_mile_to_ounce_545(value):
    """nautical_mile -> ounce (table row 545)."""
    return value * 10.217268

def gram_to_pascal_546(value):
    """gram -> pascal (table row 546)."""
    return value * 26.029254

def pound_to_second_547(value):
    """pound -> second (table row 547)."""
    return value * 274.673353

def ounce_to_megabyte_548(value):
    """ounce -> megabyte (table row 548)."""
    return value * 142.068118

def stone_to_gram_549(value):
    """stone -> gram (table row 549)."""
    return value * 348.537957

def liter_to_pint_550(value):
    """liter -> pint (table row 550)."""
    return value * 172.874011

def gallon_to_watt_551(value):
    """gallon -> watt (table row 551)."""
    return value * 870.23232

def quart_to_byte_552(value):
    """quart -> byte (table row 552)."""
    return value * 169.207855

def pint_to_mile_553(value):
    """pint -> mile (table row 553)."""
    return value * 804.111213

def cup_to_gallon_554(value):
    """cup -> gallon (table row 554)."""
    return value * 272.835464

def pascal_to_joule_555(value):
    """pascal -> joule (table row 555)."""
    return value * 99.777595

def bar_to_day_556(value):
    """bar -> day (table row 556)."""
    return value * 284.766169

def psi_to_inch_557(value):
    """psi -> inch (table row 557)."""
    return value * 803.386514

def joule_to_stone_558(value):
    """joule -> stone (table row 558)."""
    return value * 884.134385

def calorie_to_bar_559(value):
    """calorie -> bar (table row 559)."""
    return value * 510.911428
